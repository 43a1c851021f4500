//   g++ -O2 -std=c++20 -pthread wr.cc -o wr && ./wr SECONDS BYTES NT(0|1)
// Two pinned threads take turns on one buffer: A writes it (memset, or non-temporal stores), then
// B reads it (memcpy into a private buffer). Each turn timed by the thread that runs it, beside a
// cache line's round trip measured apart (xcore.cc, QUIET=1, between runs), to see what the vCPUs'
// placement does to each. Prints the write and read rates (GB/s) of every turn.
#include <emmintrin.h>
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
static void ntset(char* d, int v, size_t n) {
  __m128i x = _mm_set1_epi8(static_cast<char>(v));
  for (size_t i = 0; i < n; i += 64) {
    _mm_stream_si128((__m128i*)(d + i), x);
    _mm_stream_si128((__m128i*)(d + i + 16), x);
    _mm_stream_si128((__m128i*)(d + i + 32), x);
    _mm_stream_si128((__m128i*)(d + i + 48), x);
  }
  _mm_sfence();
}
alignas(64) std::atomic<long> turn{0};
int main(int argc, char** argv) {
  const double secs = argc > 1 ? atof(argv[1]) : 10;
  const size_t S = argc > 2 ? atol(argv[2]) : (1 << 20);
  const bool nt = argc > 3 && atoi(argv[3]) == 1;
  char* x = static_cast<char*>(aligned_alloc(4096, S));
  char* priv = static_cast<char*>(aligned_alloc(4096, S));
  memset(x, 0, S);
  memset(priv, 0, S);
  std::atomic<double> readSeconds{0};
  std::thread b([&] {
    pin(1);
    long t = 1;
    for (;;) {
      long v;
      while ((v = turn.load(std::memory_order_acquire)) != t) {
        if (v < 0) return;
      }
      if ((t & 1) == 1) {  // read turn: copy x out
        auto s = Clock::now();
        memcpy(priv, x, S);
        readSeconds.store(since(s));
      }
      turn.store(t + 1, std::memory_order_release);  // ping-pong turns: odd B, even A
      t += 2;
    }
  });
  pin(0);
  long t = 0;
  auto t0 = Clock::now();
  while (since(t0) < secs) {
    // write turn (A), then read turn (B)
    auto s = Clock::now();
    if (nt)
      ntset(x, static_cast<int>(t), S);
    else
      memset(x, static_cast<int>(t), S);
    double w = since(s);
    turn.store(++t, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != t + 1) {
    }
    ++t;
    double r = readSeconds.load();
    printf("%.2f %.2f\n", S / w / 1e9, S / r / 1e9);
  }
  turn.store(-1);
  b.join();
}
