// Two pinned threads: a cache line's round trip between them (20000 ping-pongs), then 64 times the
// first writes 256 KiB and the second copies it out ("xcore"), against one thread doing both
// ("local"). QUIET=1 prints only the round trip's 10th, 50th and 90th percentiles at the end.
//   g++ -O2 -std=c++20 -pthread xcore.cc -o xcore && ./xcore 15
#include <pthread.h>
#include <sched.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using Clock = std::chrono::steady_clock;
alignas(64) std::atomic<long> ping{0};
alignas(64) std::atomic<long> pong{0};
alignas(64) std::atomic<long> phase{0};
static void pin(int c) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
constexpr size_t kBuf = 256 << 10;
alignas(4096) static char buf[kBuf];
alignas(4096) static char dst[kBuf];
alignas(64) std::atomic<long> written{0};
alignas(64) std::atomic<long> readdone{0};
int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 20;
  std::atomic<bool> stop{false};
  std::thread b([&] {
    pin(1);
    long last = 0;
    while (!stop.load()) {
      long p = ping.load(std::memory_order_acquire);
      if (p != last) {
        last = p;
        if (p < 0) {  // copy phase: read buf into dst
          memcpy(dst, buf, kBuf);
          readdone.store(-p, std::memory_order_release);
        } else
          pong.store(p, std::memory_order_release);
      }
    }
  });
  pin(0);
  auto t0 = Clock::now();
  long seq = 0;
  std::vector<double> rts;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < secs) {
    const int R = 20000;
    auto s = Clock::now();
    for (int i = 0; i < R; ++i) {
      long v = ++seq;
      ping.store(v, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != v) {
      }
    }
    double rt = std::chrono::duration<double>(Clock::now() - s).count() / R * 1e9;
    rts.push_back(rt);
    // copy phase: A writes buf, B reads it (cross-core), 64 times
    const int C = 64;
    s = Clock::now();
    for (int i = 0; i < C; ++i) {
      memset(buf, i, kBuf);
      long v = ++seq;
      ping.store(-v, std::memory_order_release);
      while (readdone.load(std::memory_order_acquire) != v) {
      }
    }
    double t = std::chrono::duration<double>(Clock::now() - s).count();
    // local: same memset+memcpy on one core
    s = Clock::now();
    for (int i = 0; i < C; ++i) {
      memset(buf, i, kBuf);
      memcpy(dst, buf, kBuf);
    }
    double tl = std::chrono::duration<double>(Clock::now() - s).count();
    if (getenv("QUIET")) continue;
    printf("%6.2f s  rt %7.1f ns  xcore %6.2f GB/s  local %6.2f GB/s\n",
           std::chrono::duration<double>(Clock::now() - t0).count(), rt, C * kBuf / t / 1e9,
           C * kBuf / tl / 1e9);
    fflush(stdout);
  }
  stop = true;
  ping.store(++seq);
  b.join();
  std::sort(rts.begin(), rts.end());
  printf("rt p10 %.0f p50 %.0f p90 %.0f ns\n", rts[rts.size() / 10], rts[rts.size() / 2],
         rts[rts.size() * 9 / 10]);
}
