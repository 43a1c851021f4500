// The probe behind transports/shm/README.md's "When the kernel's copy pays" (2026-11-28): the
// kernel's copy (process_vm_readv) against two memcpy through a ring of shared 512 KiB slots,
// between two threads or two processes, with the sent buffer rewritten before every round
// ("dirty") or written once ("clean"). Prints kernel/slots microseconds and their ratio, the
// medians of the last 16 of 32 rounds, per repetition. Not built by CMake; a record of what ran:
//   g++ -O2 -std=c++20 -pthread kernel_copy_probe.cc -o kernel_copy_probe && ./kernel_copy_probe 5
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using Clock = std::chrono::steady_clock;
static double now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

struct Shared {
  std::atomic<long> turn;     // round number the reader may start (writer sets)
  std::atomic<long> done;     // rounds the reader finished
  std::atomic<long> written;  // slices written (pipelined)
  std::atomic<long> freed;    // slices freed
  double start[64];
  double end[64];
  double writerTime[64];
  double readerTime[64];
  pid_t writerPid;
  unsigned long sourceAddr;
};

constexpr size_t kSlot = 512 << 10;
constexpr int kSlots = 8;

static void spinUntil(std::atomic<long>& a, long want) {
  while (a.load(std::memory_order_acquire) < want) __builtin_ia32_pause();
}

// mode 0: slots, single copy each side (message <= slot) timed separately (sum);
// mode 1: kernel read; mode 2: pipelined slots, end-to-end.
static bool gClean = false;
static void run(bool processes, size_t bytes, int rounds, double* kernelMed, double* slotsMed) {
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  auto* slots = static_cast<char*>(
      mmap(nullptr, kSlot * kSlots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  memset(slots, 0, kSlot * kSlots);
  new (sh) Shared{};
  std::vector<char> source(bytes, 1);
  sh->writerPid = getpid();
  sh->sourceAddr = reinterpret_cast<unsigned long>(source.data());
  auto reader = [&] {
    std::vector<char> target(bytes, 2);
    long slice = 0;
    for (int r = 0; r < 2 * rounds; ++r) {
      spinUntil(sh->turn, r + 1);
      double t0 = now();
      if (r % 2 == 1) {
        iovec l{target.data(), bytes}, rm{reinterpret_cast<void*>(sh->sourceAddr), bytes};
        if (process_vm_readv(sh->writerPid, &l, 1, &rm, 1, 0) != (ssize_t)bytes) _exit(3);
      } else {
        double copying = 0;
        for (size_t off = 0; off < bytes; off += kSlot, ++slice) {
          spinUntil(sh->written, slice + 1);
          size_t n = std::min(kSlot, bytes - off);
          double c0 = now();
          memcpy(target.data() + off, slots + (slice % kSlots) * kSlot, n);
          copying += now() - c0;
          sh->freed.store(slice + 1, std::memory_order_release);
        }
        t0 = now() - copying;
      }
      asm volatile("" : : "r"(target.data()) : "memory");
      sh->end[r] = now();
      sh->readerTime[r] = sh->end[r] - t0;
      sh->done.store(r + 1, std::memory_order_release);
    }
  };
  pid_t child = -1;
  pthread_t thread{};
  if (processes) {
    child = fork();
    if (child == 0) {
      reader();
      _exit(0);
    }
  } else {
    static decltype(reader)* rp;
    rp = &reader;
    pthread_create(
        &thread, nullptr,
        [](void*) -> void* {
          (*rp)();
          return nullptr;
        },
        nullptr);
  }
  long slice = 0;
  for (int r = 0; r < 2 * rounds; ++r) {
    if (!gClean || r == 0)
      memset(source.data(), r + 3, bytes);  // the sender just wrote its message
    sh->start[r] = now();
    sh->turn.store(r + 1, std::memory_order_release);
    if (r % 2 == 0) {
      double t0 = now();
      for (size_t off = 0; off < bytes; off += kSlot, ++slice) {
        spinUntil(sh->freed, slice + 1 - kSlots);
        size_t n = std::min(kSlot, bytes - off);
        memcpy(slots + (slice % kSlots) * kSlot, source.data() + off, n);
        sh->written.store(slice + 1, std::memory_order_release);
      }
      sh->writerTime[r] = now() - t0;
    }
    spinUntil(sh->done, r + 1);
  }
  if (processes) {
    int st;
    waitpid(child, &st, 0);
  } else {
    pthread_join(thread, nullptr);
  }
  std::vector<double> k, s, sSum;
  for (int r = 2 * (rounds / 2); r < 2 * rounds; ++r) {  // the first half warms up
    if (r % 2)
      k.push_back(sh->readerTime[r]);
    else {
      s.push_back(sh->end[r] - sh->start[r]);
      sSum.push_back(sh->writerTime[r] + sh->readerTime[r]);
    }
  }
  auto med = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  *kernelMed = med(k);
  // one slot: the sum of the two copies (as kernel_copy.cc); several: end to end (pipelined)
  *slotsMed = bytes <= kSlot ? med(sSum) : med(s);
  munmap(sh, sizeof(Shared));
  munmap(slots, kSlot * kSlots);
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  struct V {
    const char* name;
    bool processes;
    size_t bytes;
    bool clean;
  } vs[] = {{"threads-256K-dirty", false, 256 << 10, false},
            {"threads-256K-clean", false, 256 << 10, true},
            {"procs-256K-dirty", true, 256 << 10, false},
            {"procs-256K-clean", true, 256 << 10, true},
            {"procs-1M-dirty", true, 1 << 20, false},
            {"procs-1M-clean", true, 1 << 20, true},
            {"procs-4M-clean", true, 4 << 20, true}};
  for (const V& v : vs) {
    std::printf("%-20s", v.name);
    gClean = v.clean;
    for (int i = 0; i < reps; ++i) {
      double k, s;
      run(v.processes, v.bytes, 32, &k, &s);
      std::printf(" %.0f/%.0f=%.2f", k * 1e6, s * 1e6, k / s);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}
