// A FIFO of 8 slots of 128 KiB between two processes (fork, a MAP_SHARED mapping) or two threads,
// pinned to CPUs 0 and 1: the producer writes 1 MiB into the slots (memcpy, or non-temporal
// stores), the consumer copies it out; beside each round a cache line's round trip (ns). Does the
// placement that slows ringlet's calls slow this too?
//   g++ -O2 -std=c++20 -pthread fifo2.cc -o fifo2 && ./fifo2 SECONDS FORK(0|1) NT(0|1)
#include <emmintrin.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
using Clock = std::chrono::steady_clock;
static void pin(int c) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  sched_setaffinity(0, sizeof s, &s);
}
static double since(Clock::time_point s) {
  return std::chrono::duration<double>(Clock::now() - s).count();
}
constexpr size_t S = 8, K = 128 << 10, TOTAL = 1 << 20;
struct Shared {
  alignas(64) std::atomic<long> head;
  alignas(64) std::atomic<long> tail;
  alignas(64) std::atomic<long> go;
  alignas(64) std::atomic<long> done;
  alignas(64) std::atomic<long> ping;
  alignas(64) std::atomic<long> pong;
  alignas(4096) char slots[S * K];
};
static void consumer(Shared* sh, int cpu) {
  pin(cpu);
  char* dst = static_cast<char*>(aligned_alloc(4096, TOTAL));
  memset(dst, 0, TOTAL);
  long seen = 0, msg = 0;
  for (;;) {
    long g = sh->go.load(std::memory_order_acquire);
    if (g < 0) return;
    if (g == seen) {
      long p = sh->ping.load(std::memory_order_acquire);
      if (p != sh->pong.load(std::memory_order_relaxed))
        sh->pong.store(p, std::memory_order_release);
      continue;
    }
    seen = g;
    for (size_t off = 0; off < TOTAL; off += K) {
      while (sh->head.load(std::memory_order_acquire) <= msg) {
      }
      memcpy(dst + off, sh->slots + (msg % S) * K, K);
      ++msg;
      sh->tail.store(msg, std::memory_order_release);
    }
    sh->done.store(g, std::memory_order_release);
  }
}
int main(int argc, char** argv) {
  const double secs = argc > 1 ? atof(argv[1]) : 10;
  const bool fork_ = argc > 2 && atoi(argv[2]) == 1;
  const bool nt = argc > 3 && atoi(argv[3]) == 1;
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (sh) Shared{};
  pid_t child = -1;
  std::thread t;
  if (fork_) {
    child = fork();
    if (child == 0) {
      consumer(sh, 1);
      _exit(0);
    }
  } else
    t = std::thread(consumer, sh, 1);
  pin(0);
  char* src = static_cast<char*>(aligned_alloc(4096, TOTAL));
  memset(src, 1, TOTAL);
  long msg = 0, g = 0;
  auto t0 = Clock::now();
  while (since(t0) < secs) {
    auto s = Clock::now();
    for (int i = 0; i < 500; ++i) {
      long v = sh->ping.load() + 1;
      sh->ping.store(v, std::memory_order_release);
      while (sh->pong.load(std::memory_order_acquire) != v) {
      }
    }
    double rt = since(s) / 500 * 1e9;
    s = Clock::now();
    for (int rep = 0; rep < 8; ++rep) {
      sh->go.store(++g, std::memory_order_release);
      for (size_t off = 0; off < TOTAL; off += K) {
        while (msg - sh->tail.load(std::memory_order_acquire) >= (long)S) {
        }
        if (nt) {
          char* d = sh->slots + (msg % S) * K;
          for (size_t i = 0; i < K; i += 64) {
            for (int k = 0; k < 4; ++k)
              _mm_stream_si128((__m128i*)(d + i + 16 * k),
                               _mm_load_si128((const __m128i*)(src + off + i + 16 * k)));
          }
          _mm_sfence();
        } else
          memcpy(sh->slots + (msg % S) * K, src + off, K);
        ++msg;
        sh->head.store(msg, std::memory_order_release);
      }
      while (sh->done.load(std::memory_order_acquire) != g) {
      }
    }
    printf("%.0f %.1f\n", rt, since(s) / 8 * 1e6);
  }
  sh->go.store(-1);
  if (fork_)
    waitpid(child, nullptr, 0);
  else
    t.join();
}
