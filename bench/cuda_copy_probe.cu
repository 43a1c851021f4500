// cuda-copy-probe: how long a small copy between a GPU and pinned host memory takes when several
// processes on one GPU issue theirs at the same moment, as the ranks of a staged device
// collective do. The question it answers (transports/cuda/README.md): where a staged 8-byte
// all-reduce's ~175 us per call go when every rank shares one GPU.
//
// Forks --procs processes (before any CUDA call); each runs every configuration in the same
// order, in lockstep through a barrier in shared memory, for --iters iterations:
//   pattern inout: copy device -> host, wait, barrier (the host collective), host -> device, wait
//   pattern out:   barrier, copy host -> device, wait (a broadcast's receivers)
//   copy 1d: cudaMemcpyAsync; 2d: cudaMemcpy2DAsync in two rows; 2d-1row: in one row; kernel: a
//   kernel reads or
//            writes the mapped pinned memory itself (no copy engine)
//   wait spin: cudaEventQuery in a loop; backoff: ringlet's waitEvent (spin, yield, sleep);
//        blocking: an event made with cudaEventBlockingSync and cudaEventSynchronize
// Prints, per configuration, the median and 90th percentile time of one iteration, the slowest
// process's. Usage: cuda-copy-probe [--procs P] [--iters N]
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shared {
  std::atomic<int> arrived;
  std::atomic<int> generation;
  double median[64][64];  // [configuration][process], us
  double p90[64][64];
};

void barrier(Shared* s, int procs) {
  const int generation = s->generation.load(std::memory_order_acquire);
  if (s->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == procs) {
    s->arrived.store(0, std::memory_order_relaxed);
    s->generation.store(generation + 1, std::memory_order_release);
    return;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (s->generation.load(std::memory_order_acquire) == generation) {
    if (Clock::now() > deadline) {  // a process that failed never arrives
      std::fprintf(stderr, "ringlet: cuda-copy-probe: barrier timed out after 30 s\n");
      std::exit(1);
    }
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "ringlet: cuda-copy-probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void copyBytes(unsigned char* dst, const unsigned char* src, size_t bytes) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += gridDim.x * blockDim.x)
    dst[i] = src[i];
}

enum class Copy { k1d, k2d, k2dOneRow, kKernel };
enum class Wait { kSpin, kBackoff, kBlocking };

struct Config {
  bool inout;
  Copy copy;
  Wait wait;
  size_t bytes;
  std::string name() const {
    static const char* copies[] = {"1d", "2d", "2d-1row", "kernel"};
    static const char* waits[] = {"spin", "backoff", "blocking"};
    return std::string(inout ? "inout" : "out") + " " + copies[static_cast<int>(copy)] + " " +
           waits[static_cast<int>(wait)] + " " + std::to_string(bytes) + "B";
  }
};

void enqueue(Copy copy, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
             cudaStream_t s) {
  switch (copy) {
    case Copy::k1d:
      check(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
      break;
    case Copy::k2d:
      check(cudaMemcpy2DAsync(dst, bytes / 2, src, bytes / 2, bytes / 2, 2, kind, s),
            "cudaMemcpy2DAsync");
      break;
    case Copy::k2dOneRow:
      check(cudaMemcpy2DAsync(dst, bytes, src, bytes, bytes, 1, kind, s), "cudaMemcpy2DAsync");
      break;
    case Copy::kKernel: {
      const int blocks = static_cast<int>(std::min<size_t>(64, (bytes + 255) / 256));
      copyBytes<<<blocks, 256, 0, s>>>(static_cast<unsigned char*>(dst),
                                       static_cast<const unsigned char*>(src), bytes);
      check(cudaGetLastError(), "kernel launch");
      break;
    }
  }
}

void waitFor(Wait wait, cudaEvent_t spinEvent, cudaEvent_t blockingEvent, cudaStream_t s) {
  switch (wait) {
    case Wait::kSpin:
      check(cudaEventRecord(spinEvent, s), "cudaEventRecord");
      while (cudaEventQuery(spinEvent) == cudaErrorNotReady) {
      }
      break;
    case Wait::kBackoff:
      check(cudaEventRecord(spinEvent, s), "cudaEventRecord");
      ringlet::kernels::cuda::waitEvent(spinEvent, Clock::now() + std::chrono::seconds(30),
                                        std::chrono::seconds(30),
                                        [] { return std::string("probe copy"); });
      break;
    case Wait::kBlocking:
      check(cudaEventRecord(blockingEvent, s), "cudaEventRecord");
      check(cudaEventSynchronize(blockingEvent), "cudaEventSynchronize");
      break;
  }
}

int runProcess(Shared* shared, int rank, int procs, int iters, const std::vector<Config>& configs) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t spinEvent, blockingEvent;
  check(cudaEventCreateWithFlags(&spinEvent, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&blockingEvent, cudaEventDisableTiming | cudaEventBlockingSync),
        "cudaEventCreate");
  size_t most = 0;
  for (const Config& c : configs) most = std::max(most, c.bytes);
  void* device = nullptr;
  void* host = nullptr;
  check(cudaMalloc(&device, most), "cudaMalloc");
  check(cudaHostAlloc(&host, most, cudaHostAllocMapped), "cudaHostAlloc");
  check(cudaMemset(device, rank, most), "cudaMemset");
  std::vector<double> times(iters);
  for (size_t c = 0; c < configs.size(); ++c) {
    const Config& config = configs[c];
    for (int i = -iters / 10; i < iters; ++i) {
      barrier(shared, procs);
      const auto start = Clock::now();
      if (config.inout) {
        enqueue(config.copy, host, device, config.bytes, cudaMemcpyDeviceToHost, s);
        waitFor(config.wait, spinEvent, blockingEvent, s);
        barrier(shared, procs);
      }
      enqueue(config.copy, device, host, config.bytes, cudaMemcpyHostToDevice, s);
      waitFor(config.wait, spinEvent, blockingEvent, s);
      if (i >= 0)
        times[i] = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    }
    std::sort(times.begin(), times.end());
    shared->median[c][rank] = times[iters / 2];
    shared->p90[c][rank] = times[iters * 9 / 10];
  }
  barrier(shared, procs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int procs = 2;
  int iters = 400;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--procs") == 0) {
      procs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--iters") == 0) {
      iters = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "ringlet: cuda-copy-probe: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (procs < 1 || procs > 64 || iters < 10) {
    std::fprintf(stderr, "ringlet: cuda-copy-probe: --procs must be 1-64, --iters at least 10\n");
    return 2;
  }
  std::vector<Config> configs;
  for (size_t bytes : {size_t{8}, size_t{64} << 10})
    for (bool inout : {true, false})
      for (Copy copy : {Copy::k1d, Copy::k2d, Copy::k2dOneRow, Copy::kKernel})
        for (Wait wait : {Wait::kSpin, Wait::kBackoff, Wait::kBlocking})
          configs.push_back({inout, copy, wait, bytes});
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    std::perror("ringlet: cuda-copy-probe: mmap");
    return 1;
  }
  std::vector<pid_t> children;
  for (int rank = 0; rank < procs; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) _exit(runProcess(shared, rank, procs, iters, configs));
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) {
    std::fprintf(stderr, "ringlet: cuda-copy-probe: %d of %d processes failed\n", failed, procs);
    return 1;
  }
  std::printf("# %d processes on GPU 0, %d iterations; us per iteration, slowest process\n", procs,
              iters);
  std::printf("%-32s %10s %10s\n", "configuration", "median", "p90");
  for (size_t c = 0; c < configs.size(); ++c) {
    double median = 0, p90 = 0;
    for (int r = 0; r < procs; ++r) {
      median = std::max(median, shared->median[c][r]);
      p90 = std::max(p90, shared->p90[c][r]);
    }
    std::printf("%-32s %10.1f %10.1f\n", configs[c].name().c_str(), median, p90);
  }
  return 0;
}
