// Measures the shared-memory transport between forked process ranks (not a test):
//   - one-way latency of an 8-byte message (ping-pong / 2),
//   - throughput of 64 KiB .. 16 MiB buffers cut into slots (sender writes into the slot,
//     receiver copies out of it: the one pass each side a collective makes),
//   - the spin-threshold sweep behind transport::Backoff: ping-pong and throughput with 2 ranks,
//   and a
//     ring exchange with 8 ranks (more ranks than cores), for several spin counts.
//
//   shm_link_perf [--quick] [--sweep-only] [--spins 0,100,1000] [--yields N] [--reps N]
// Each number is the median of --reps runs (default 3), each run a fresh set of processes.
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ringlet/store.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/ranks.h"

namespace rs = ringlet::testing::shm;
using Clock = std::chrono::steady_clock;

namespace {

int gReps = 3;

double median(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Runs body on `size` forked ranks sharing a file store; returns false if any rank failed.
bool runRanks(int size,
              const std::function<void(int, int, std::shared_ptr<ringlet::Store>)>& body) {
  const std::string dir = ringlet::testing::makeTempDir("ringlet-shm-perf");
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        body(rank, size, ringlet::makeFileStore(dir));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return ok;
}

rs::ShmOptions options(const rs::ShmDir& dir, int spins, int yields, size_t slotBytes) {
  rs::ShmOptions o = rs::testOptions(dir.path(), slotBytes, 8);
  ringlet::transport::Backoff backoff;  // the sweep sets the spin count itself
  backoff.spins = spins;
  if (yields >= 0) backoff.yields = yields;
  o.backoff = backoff;
  return o;
}

// Runs `measure` on `size` fresh forked ranks --reps times, each run on a mesh of its own
// (prefix "<tag><run>"): the median of rank 0's figures, -1 if a run failed. Rank 0 hands its
// figure back through a file beside the mesh's directory.
using Measure = std::function<double(int rank, int size, std::shared_ptr<ringlet::Store> store,
                                     const std::string& prefix)>;
double medianOfRuns(const rs::ShmDir& dir, const std::string& job, const std::string& tag, int size,
                    const Measure& measure) {
  std::vector<double> runs;
  for (int run = 0; run < gReps; ++run) {
    const std::string prefix = fmt::format("{}{}", tag, run);
    const std::string result = dir.path() + "/../ringlet-perf-" + job + prefix;
    const bool ok = runRanks(size, [&](int rank, int n, std::shared_ptr<ringlet::Store> store) {
      const double value = measure(rank, n, std::move(store), prefix);
      if (rank == 0) {
        FILE* f = std::fopen(result.c_str(), "w");
        std::fprintf(f, "%.6f", value);
        std::fclose(f);
      }
    });
    if (!ok) return -1;
    FILE* f = std::fopen(result.c_str(), "r");
    double value = 0;
    if (f != nullptr && std::fscanf(f, "%lf", &value) == 1) runs.push_back(value);
    if (f != nullptr) std::fclose(f);
    std::remove(result.c_str());
  }
  return median(runs);
}

// One-way latency in microseconds (median of --reps runs of `iters` round trips).
double pingPong(int spins, int yields, int iters) {
  rs::ShmDir dir;
  const std::string job = ringlet::testing::uniqueJobId("perf-pp");
  return medianOfRuns(
      dir, job, "pp", 2,
      [&](int rank, int size, std::shared_ptr<ringlet::Store> store, const std::string& prefix) {
        rs::Mesh mesh =
            rs::connectMesh(rank, size, store, options(dir, spins, yields, 4096), job, prefix);
        ringlet::transport::Link& link = mesh.to(1 - rank);
        std::byte msg[8] = {};
        auto wait = mesh.wait(std::chrono::seconds(60));
        auto round = [&] {
          if (rank == 0) {
            link.send(msg, 8, wait);
            link.recvInto(msg, 8, wait);
          } else {
            link.recvInto(msg, 8, wait);
            link.send(msg, 8, wait);
          }
        };
        for (int i = 0; i < iters / 10; ++i) round();
        auto start = Clock::now();
        for (int i = 0; i < iters; ++i) round();
        double us = seconds(Clock::now() - start) / iters / 2 * 1e6;
        return us;
      });
}

// Rank 0 streams `count` messages of `bytes` (one cell each) to rank 1, which reads each into
// its memory: nanoseconds per message (median of --reps runs). The link's share of a small rooted
// collective's time, where the root never waits for its peer.
double smallStream(int spins, int yields, size_t bytes, int count) {
  rs::ShmDir dir;
  const std::string job = ringlet::testing::uniqueJobId("perf-stream");
  return medianOfRuns(
      dir, job, "st", 2,
      [&](int rank, int size, std::shared_ptr<ringlet::Store> store, const std::string& prefix) {
        rs::Mesh mesh =
            rs::connectMesh(rank, size, store, options(dir, spins, yields, 4096), job, prefix);
        ringlet::transport::Link& link = mesh.to(1 - rank);
        std::vector<std::byte> msg(bytes);
        auto wait = mesh.wait(std::chrono::seconds(60));
        auto stream = [&](int n) {
          for (int i = 0; i < n; ++i) {
            if (rank == 0) {
              link.send(msg.data(), bytes, wait);
            } else {
              link.recvInto(msg.data(), bytes, wait);
            }
          }
          // Both ends meet before the clock stops: the last message was read.
          if (rank == 0) {
            link.recvInto(msg.data(), 0, wait);
          } else {
            link.send(msg.data(), 0, wait);
          }
        };
        stream(count / 10);
        auto start = Clock::now();
        stream(count);
        double ns = seconds(Clock::now() - start) / count * 1e9;
        return ns;
      });
}

// Rank 0 streams `bytes` per iteration to rank 1, cut into slots; GB/s (median of --reps runs).
double throughput(int spins, int yields, size_t bytes, size_t slotBytes) {
  rs::ShmDir dir;
  const std::string job = ringlet::testing::uniqueJobId("perf-bw");
  const int iters = static_cast<int>(std::max<size_t>(4, (size_t{512} << 20) / bytes));
  return medianOfRuns(
      dir, job, "bw", 2,
      [&](int rank, int size, std::shared_ptr<ringlet::Store> store, const std::string& prefix) {
        rs::Mesh mesh =
            rs::connectMesh(rank, size, store, options(dir, spins, yields, slotBytes), job, prefix);
        ringlet::transport::Link& link = mesh.to(1 - rank);
        std::vector<std::byte> buffer(bytes, std::byte{1});
        auto wait = mesh.wait(std::chrono::seconds(60));
        std::byte ack[1] = {};
        auto iteration = [&] {
          for (size_t off = 0; off < bytes; off += slotBytes) {
            size_t n = std::min(slotBytes, bytes - off);
            if (rank == 0) {
              std::byte* slot = link.sendBuffer(n, nullptr, wait);
              std::memcpy(slot, buffer.data() + off, n);
              link.send(slot, n, wait);
            } else {
              const std::byte* data = link.recv(n, wait);
              std::memcpy(buffer.data() + off, data, n);
              link.release();
            }
          }
        };
        iteration();
        if (rank == 1)
          link.send(ack, 1, wait);
        else
          link.recvInto(ack, 1, wait);
        auto start = Clock::now();
        for (int i = 0; i < iters; ++i) iteration();
        if (rank == 1)
          link.send(ack, 1, wait);
        else
          link.recvInto(ack, 1, wait);
        double gbps = static_cast<double>(bytes) * iters / seconds(Clock::now() - start) / 1e9;
        return gbps;
      });
}

// `size` ranks in a ring: each step every rank sends `bytes` to rank+1 and receives from rank-1
// (the shape of one ring all-reduce step). Microseconds per step (median of --reps runs).
double ringStep(int spins, int yields, int size, size_t bytes, int steps) {
  rs::ShmDir dir;
  const std::string job = ringlet::testing::uniqueJobId("perf-ring");
  const size_t slotBytes = std::max<size_t>(4096, (bytes + 63) / 64 * 64);
  return medianOfRuns(
      dir, job, "ring", size,
      [&](int rank, int n, std::shared_ptr<ringlet::Store> store, const std::string& prefix) {
        rs::Mesh mesh = rs::connectMesh(rank, n, store, options(dir, spins, yields, slotBytes), job,
                                        prefix, std::chrono::seconds(60));
        ringlet::transport::Link& next = mesh.to((rank + 1) % n);
        ringlet::transport::Link& prev = mesh.to((rank + n - 1) % n);
        std::vector<std::byte> src(bytes, std::byte{2}), dst(bytes);
        auto wait = mesh.wait(std::chrono::seconds(120));
        auto step = [&] {
          std::byte* slot = next.sendBuffer(bytes, nullptr, wait);
          if (bytes > 0) std::memcpy(slot, src.data(), bytes);
          next.send(slot, bytes, wait);
          const std::byte* data = prev.recv(bytes, wait);
          if (bytes > 0) std::memcpy(dst.data(), data, bytes);
          prev.release();
        };
        for (int i = 0; i < steps / 10; ++i) step();
        auto start = Clock::now();
        for (int i = 0; i < steps; ++i) step();
        double us = seconds(Clock::now() - start) / steps * 1e6;
        // Nobody closes before everybody finished (a closed neighbour ends the others' waits).
        store->add("done", 1);
        while (store->getString("done") != std::to_string(n)) usleep(1000);
        return us;
      });
}

std::vector<int> parseList(const std::string& text) {
  std::vector<int> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) values.push_back(std::stoi(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  bool sweepOnly = false;
  std::vector<int> spins = {0, 100, 1000, 10000, 100000};
  int yields = -1;  // default policy
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--sweep-only") {
      sweepOnly = true;
    } else if (arg == "--spins" && i + 1 < argc) {
      spins = parseList(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      gReps = std::stoi(argv[++i]);
    } else if (arg == "--yields" && i + 1 < argc) {
      yields = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--sweep-only] [--spins a,b,c] [--yields n] [--reps n]\n",
                   argv[0]);
      return 2;
    }
  }
  const int ppIters = quick ? 5000 : 20000;
  const int defaultSpins = ringlet::transport::Backoff{}.spins;
  if (!sweepOnly) {
    std::printf("# shm link, 2 process ranks, default policy (spin %d)\n", defaultSpins);
    std::printf("latency 8 B one-way: %.2f us\n", pingPong(defaultSpins, yields, ppIters));
    for (size_t bytes : {size_t{8}, size_t{56}}) {
      std::printf("stream of %zu B messages one way: %.1f ns per message\n", bytes,
                  smallStream(defaultSpins, yields, bytes, quick ? 200000 : 2000000));
    }
    std::printf("%10s %10s %10s\n", "bytes", "slot", "GB/s");
    for (size_t bytes = 64 << 10; bytes <= (size_t{16} << 20); bytes *= 4) {
      size_t slot = size_t{512} << 10;
      std::printf("%10zu %10zu %10.2f\n", bytes, slot,
                  throughput(defaultSpins, yields, bytes, slot));
      std::fflush(stdout);
    }
  }
  std::printf("# spin-threshold sweep (yields %d)\n",
              yields < 0 ? ringlet::transport::Backoff{}.yields : yields);
  std::printf("%8s %12s %12s %14s %14s %14s %14s\n", "spins", "pp2 us", "bw2 1M GB/s",
              "ring2 64K us", "ring8 8B us", "ring8 64K us", "ring8 1M us");
  for (int s : spins) {
    double pp = pingPong(s, yields, ppIters);
    double bw = throughput(s, yields, size_t{1} << 20, size_t{512} << 10);
    double r2 = ringStep(s, yields, 2, 64 << 10, quick ? 500 : 2000);
    double r8small = ringStep(s, yields, 8, 8, quick ? 500 : 2000);
    double r8 = ringStep(s, yields, 8, 64 << 10, quick ? 100 : 500);
    double r8big = ringStep(s, yields, 8, 1 << 20, quick ? 20 : 100);
    std::printf("%8d %12.2f %12.2f %14.1f %14.1f %14.1f %14.1f\n", s, pp, bw, r2, r8small, r8,
                r8big);
    std::fflush(stdout);
  }
  return 0;
}
