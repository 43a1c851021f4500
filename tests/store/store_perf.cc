// What sealing costs the TCP store (RINGLET_SOCKET_ENCRYPT=1): connections opened (greeting,
// proofs, keys) and set+get round trips of small and large values, in clear and sealed in
// alternating rounds against one server each, over loopback. Run by hand, not a test:
//   tests/store_perf [--rounds 5] [--ops 2000]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "ringlet/store.h"

namespace {

using namespace ringlet;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "store-perf-secret-of-some-length";

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

struct Times {
  double connectUs = 0;  // one connection: TCP connect, greeting, proofs (and keys)
  double smallUs = 0;    // one set + get of 64 bytes
  double largeMBps = 0;  // set + get of 4 MiB, bytes moved both ways / time
};

Times measure(bool sealed, int ops) {
  auto server = TcpStoreServer::start({.secret = kSecret, .sealed = sealed});
  const TcpStoreClientOptions options{.secret = kSecret, .sealed = sealed};
  Times t;
  const int connections = std::max(1, ops / 10);
  auto start = Clock::now();
  for (int i = 0; i < connections; ++i) connectTcpStore(server->host(), server->port(), options);
  t.connectUs = seconds(start) / connections * 1e6;

  auto store = connectTcpStore(server->host(), server->port(), options);
  const Bytes small(64, std::byte{7});
  start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    store->set("small", small);
    (void)store->get("small");
  }
  t.smallUs = seconds(start) / ops * 1e6;

  const Bytes large(4 << 20, std::byte{9});
  const int rounds = std::max(1, ops / 200);
  start = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    store->set("large", large);
    (void)store->get("large");
  }
  t.largeMBps = 2.0 * static_cast<double>(large.size()) * rounds / seconds(start) / 1e6;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"TCP store: in clear against sealed, alternating rounds"};
  int rounds = 5;
  int ops = 2000;
  app.add_option("--rounds", rounds, "rounds of each")->check(CLI::Range(1, 100));
  app.add_option("--ops", ops, "set+get pairs of 64 B per round (connections: a tenth)")
      ->check(CLI::Range(10, 1000000));
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:>6} {:>7} {:>14} {:>16} {:>18}\n", "round", "mode", "connect (us)",
             "set+get 64 B (us)", "set+get 4 MiB (MB/s)");
  for (int r = 0; r < rounds; ++r) {
    for (const bool sealed : {false, true}) {
      const Times t = measure(sealed, ops);
      fmt::print("{:>6} {:>7} {:>14.1f} {:>16.1f} {:>18.0f}\n", r, sealed ? "sealed" : "clear",
                 t.connectUs, t.smallUs, t.largeMBps);
    }
  }
  return 0;
}
