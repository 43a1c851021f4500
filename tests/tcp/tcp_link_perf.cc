// Measures the tcp Link: one-way latency (ping-pong), a 2-rank 8-byte "all-reduce" (two
// exchanges, as the ring does with 2 ranks), streaming bandwidth, and a ring step with N ranks
// (to see spinning ranks starve each other when they outnumber the cores).
//
//   tcp_link_perf [--processes] [--spin-us 0,20,50] [--ranks 2] [--iters 20000]
//
// Not a test: prints one line per measurement.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <thread>

#include "tests/support/ranks.h"
#include "tests/tcp/tcp_test_util.h"

namespace tcp = ringlet::transport::tcp;
using ringlet::transport::Clock;
using ringlet::transport::Link;
using namespace std::chrono_literals;

namespace {

struct Options {
  bool processes = false;
  std::vector<double> spinUs{0, 5, 20, 50, 100};
  int ranks = 2;
  int iters = 20000;
  bool bandwidth = true;
  bool yield = true;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Two ranks: round trips of `bytes`; returns one-way microseconds (median of 5 batches).
double pingPong(int rank, Link& link, const std::vector<Link*>& all, size_t bytes, int iters) {
  std::vector<std::byte> out(bytes), in(bytes);
  std::vector<double> batches;
  for (int batch = 0; batch < 6; ++batch) {
    auto wait = tcp::testing::makeWait(rank, all, 60s);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) {
        link.send(out.data(), bytes, wait);
        link.recvInto(in.data(), bytes, wait);
      } else {
        link.recvInto(in.data(), bytes, wait);
        link.send(out.data(), bytes, wait);
      }
    }
    link.flush(wait);
    if (batch > 0) batches.push_back(seconds(Clock::now() - start) / iters / 2 * 1e6);
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

// Two ranks, both directions at once, `steps` times per iteration. Two steps of 4 bytes are the
// messages of an 8-byte ring all-reduce on 2 ranks (reduce-scatter step, all-gather step); one
// step of 8 bytes is a one-exchange (recursive doubling) all-reduce. Returns microseconds per
// iteration.
double exchange(int rank, Link& link, const std::vector<Link*>& all, int steps, size_t bytes,
                int iters) {
  std::vector<std::byte> out(8), in(8);
  std::vector<double> batches;
  for (int batch = 0; batch < 6; ++batch) {
    auto wait = tcp::testing::makeWait(rank, all, 60s);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      for (int step = 0; step < steps; ++step) {
        link.send(out.data(), bytes, wait);
        link.recvInto(in.data(), bytes, wait);
      }
    }
    link.flush(wait);
    if (batch > 0) batches.push_back(seconds(Clock::now() - start) / iters * 1e6);
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

// Rank 0 streams `count` messages of `bytes` to rank 1; returns GB/s.
double stream(int rank, Link& link, const std::vector<Link*>& all, size_t bytes) {
  const size_t total = std::max<size_t>(size_t{1} << 30, bytes * 8);
  const size_t count = total / bytes;
  std::vector<std::byte> buffer(bytes);
  std::fill(buffer.begin(), buffer.end(), std::byte{1});  // touch the pages
  auto wait = tcp::testing::makeWait(rank, all, 120s);
  std::byte ack{};
  // Warm-up round trip.
  if (rank == 0) {
    link.send(buffer.data(), bytes, wait);
    link.recvInto(&ack, 1, wait);
  } else {
    link.recvInto(buffer.data(), bytes, wait);
    link.send(&ack, 1, wait);
  }
  link.flush(wait);
  const auto start = Clock::now();
  if (rank == 0) {
    for (size_t i = 0; i < count; ++i) link.send(buffer.data(), bytes, wait);
    link.recvInto(&ack, 1, wait);
  } else {
    for (size_t i = 0; i < count; ++i) link.recvInto(buffer.data(), bytes, wait);
    link.send(&ack, 1, wait);
  }
  link.flush(wait);
  return double(bytes * count) / seconds(Clock::now() - start) / 1e9;
}

// N ranks in a ring: each step sends 8 bytes right and receives 8 bytes from the left.
// Returns microseconds per step.
double ringStep(int rank, int size, tcp::testing::Endpoint& e, int iters) {
  Link* right = nullptr;
  Link* left = nullptr;
  for (auto* link : e.raw) {
    if (link->peer() == (rank + 1) % size) right = link;
    if (link->peer() == (rank + size - 1) % size) left = link;
  }
  std::vector<std::byte> out(8), in(8);
  auto wait = tcp::testing::makeWait(rank, e.raw, 120s);
  for (int i = 0; i < 100; ++i) {
    right->send(out.data(), 8, wait);
    left->recvInto(in.data(), 8, wait);
  }
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    right->send(out.data(), 8, wait);
    left->recvInto(in.data(), 8, wait);
  }
  right->flush(wait);
  return seconds(Clock::now() - start) / iters * 1e6;
}

void body(const Options& options, double spinUs, int rank, int size,
          std::shared_ptr<ringlet::Store> store) {
  ringlet::transport::Backoff backoff;
  backoff.slowWakeAwake = std::chrono::nanoseconds(static_cast<int64_t>(spinUs * 1000));
  if (!options.yield) backoff.yields = 0;
  std::vector<int> peers = tcp::testing::othersOf(rank, size);
  auto e =
      tcp::testing::connectAll(tcp::testing::makeContext(rank, size, store), peers, 30s, backoff);
  const char* mode = options.processes ? "processes" : "threads";
  if (size == 2) {
    Link& link = e.to(0);
    const double l8 = pingPong(rank, link, e.raw, 8, options.iters);
    const double l1k = pingPong(rank, link, e.raw, 1024, options.iters);
    const double ring = exchange(rank, link, e.raw, 2, 4, options.iters);
    const double once = exchange(rank, link, e.raw, 1, 8, options.iters);
    if (rank == 0) {
      fmt::print(
          "{:9} spin {:5.1f} us{}: one-way 8 B {:6.2f} us, 1 KiB {:6.2f} us; "
          "8 B all-reduce pattern: ring 2 steps {:6.2f} us, one exchange {:6.2f} us\n",
          mode, spinUs, options.yield ? "" : " (no yield)", l8, l1k, ring, once);
    }
    if (options.bandwidth) {
      for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
        const double gbs = stream(rank, link, e.raw, bytes);
        if (rank == 0) {
          fmt::print("{:9} spin {:5.1f} us: stream {:>8} B messages {:6.2f} GB/s\n", mode, spinUs,
                     bytes, gbs);
        }
      }
    }
  } else {
    const double us = ringStep(rank, size, e, options.iters / 4);
    if (rank == 0) {
      fmt::print(
          "{:9} spin {:5.1f} us{}: {}-rank ring step (8 B right, 8 B from left) {:7.2f} us\n", mode,
          spinUs, options.yield ? "" : " (no yield)", size, us);
    }
  }
  std::fflush(stdout);
  // Everybody done before links close.
  auto wait = tcp::testing::makeWait(rank, e.raw, 60s);
  std::byte token{};
  for (auto* link : e.raw) link->send(&token, 1, wait);
  for (auto* link : e.raw) link->recvInto(&token, 1, wait);
  for (auto* link : e.raw) link->flush(wait);
}

void runThreads(int size, const std::function<void(int, int, std::shared_ptr<ringlet::Store>)>& f) {
  auto store = ringlet::makeInProcessStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { f(r, size, store); });
  for (auto& t : threads) t.join();
}

void runProcesses(int size,
                  const std::function<void(int, int, std::shared_ptr<ringlet::Store>)>& f) {
  const std::string dir = ringlet::testing::makeTempDir("ringlet-tcp-perf");
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        f(r, size, ringlet::makeFileStore(dir));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"tcp Link latency and bandwidth"};
  app.add_flag("--processes", options.processes, "ranks are forked processes (default threads)");
  app.add_option("--spin-us", options.spinUs, "spin lengths to try, microseconds")->delimiter(',');
  app.add_option("--ranks", options.ranks, "2: ping-pong and streams; more: ring steps");
  app.add_flag("--no-yield{false}", options.yield, "pure spin, no sched_yield() between attempts");
  app.add_option("--iters", options.iters, "round trips per latency batch");
  app.add_flag("--no-bandwidth{false}", options.bandwidth, "skip the streaming measurements");
  app.add_flag("--sealed", tcp::testing::testSealed(),
               "links seal their bytes (RINGLET_SOCKET_ENCRYPT=1)");
  CLI11_PARSE(app, argc, argv);
  for (double spin : options.spinUs) {
    auto f = [&](int rank, int size, std::shared_ptr<ringlet::Store> store) {
      body(options, spin, rank, size, std::move(store));
    };
    if (options.processes) {
      runProcesses(options.ranks, f);
    } else {
      runThreads(options.ranks, f);
    }
  }
  return 0;
}
