//   g++ -O2 -std=c++20 -pthread local.cc -o local && ./local SECONDS
// A cache line's round trip between two pinned threads, then one thread's memcpy rate at a few
// sizes, repeated: does the placement that slows the round trip slow a core's own copies too?
#include <pthread.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using Clock = std::chrono::steady_clock;
static void pin(int c) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static double since(Clock::time_point s) {
  return std::chrono::duration<double>(Clock::now() - s).count();
}
alignas(64) std::atomic<long> ping{0};
alignas(64) std::atomic<long> pong{0};
int main(int argc, char** argv) {
  const double secs = argc > 1 ? atof(argv[1]) : 10;
  std::atomic<bool> stop{false};
  std::thread b([&] {
    pin(1);
    while (!stop.load(std::memory_order_relaxed)) {
      long p = ping.load(std::memory_order_acquire);
      if (p != pong.load(std::memory_order_relaxed)) pong.store(p, std::memory_order_release);
    }
  });
  pin(0);
  const size_t sizes[] = {256 << 10, 1 << 20, 4 << 20, 32 << 20};
  std::vector<char> src(32 << 20, 1), dst(32 << 20, 2);
  auto t0 = Clock::now();
  long v = 0;
  while (since(t0) < secs) {
    auto s = Clock::now();
    for (int i = 0; i < 2000; ++i) {
      ping.store(++v, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != v) {
      }
    }
    printf("%.0f", since(s) / 2000 * 1e9);
    for (size_t n : sizes) {
      const int reps = std::max<int>(2, (64 << 20) / n / 4);
      s = Clock::now();
      for (int i = 0; i < reps; ++i) memcpy(dst.data() + 64, src.data(), n);
      printf(" %.1f", double(n) * reps / since(s) / 1e9);
    }
    printf("\n");
  }
  stop = true;
  b.join();
}
