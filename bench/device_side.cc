#include "bench/device_side.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace ringlet::bench::device {
namespace {

void check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(
        fmt::format("{} failed: {}: {}", call, cudaGetErrorName(error), cudaGetErrorString(error)));
  }
}

}  // namespace

bool compiledIn() { return true; }

struct DeviceSide::State {
  Communicator* comm = nullptr;
  Options options;
  int device = 0;
  std::string name;
  void* send = nullptr;
  void* recv = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceCommunicator> dc;

  ~State() {
    dc.reset();
    if (stream) cudaStreamDestroy(stream);
    if (send) cudaFree(send);
    if (recv) cudaFree(recv);
  }
};

DeviceSide::DeviceSide(Communicator& comm, int localRank, const Options& options)
    : state_(std::make_unique<State>()) {
  std::string reason;
  const int devices = cuda::deviceCount(&reason);
  if (devices == 0) throw CudaError(fmt::format("--device cuda: no CUDA device: {}", reason));
  State& s = *state_;
  s.comm = &comm;
  s.options = options;
  s.device = localRank % devices;
  check(cudaSetDevice(s.device), "cudaSetDevice");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, s.device), "cudaGetDeviceProperties");
  s.name = properties.name;
  const size_t bytes = std::max<size_t>(options.maxBytes, 256);
  check(cudaMalloc(&s.send, bytes), "cudaMalloc");
  check(cudaMalloc(&s.recv, bytes), "cudaMalloc");
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.dc = std::make_unique<cuda::DeviceCommunicator>(comm, s.device);
}

DeviceSide::~DeviceSide() = default;

void* DeviceSide::send() { return state_->send; }
void* DeviceSide::recv() { return state_->recv; }

void DeviceSide::upload(void* dst, const void* src, size_t bytes) {
  // On the collectives' stream, then waited for: cudaMemcpy from pageable memory may return
  // before its DMA lands, and the legacy stream it runs on does not order a non-blocking stream.
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state_->stream),
        "cudaMemcpyAsync (host to device)");
  synchronize();
}

void DeviceSide::download(void* dst, const void* src, size_t bytes) {
  synchronize();
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
}

void DeviceSide::run(BenchOp op, const CallArgs& a) {
  State& s = *state_;
  const Options& o = s.options;
  switch (op) {
    case BenchOp::kAllreduce:
      s.dc->allreduce(a.send, a.recv, a.count, o.type, o.op, s.stream);
      return;
    case BenchOp::kBroadcast:
      s.dc->broadcast(a.recv, a.count, o.type, o.root, s.stream);
      return;
    case BenchOp::kReduce:
      s.dc->reduce(a.send, a.recv, a.count, o.type, o.op, o.root, s.stream);
      return;
    case BenchOp::kAllgather:
      s.dc->allgather(a.send, a.recv, a.count, o.type, s.stream);
      return;
    case BenchOp::kReduceScatter:
      s.dc->reduceScatter(a.send, a.recv, a.count, o.type, o.op, s.stream);
      return;
    case BenchOp::kGather:
      s.dc->gather(a.send, a.recv, a.count, o.type, o.root, s.stream);
      return;
    case BenchOp::kScatter:
      s.dc->scatter(a.send, a.recv, a.count, o.type, o.root, s.stream);
      return;
    case BenchOp::kAllToAll:
      s.dc->allToAll(a.send, a.recv, a.count, o.type, s.stream);
      return;
    case BenchOp::kAllgatherv:
      s.dc->allgatherv(a.send, a.recv, a.counts, {}, o.type, s.stream);
      return;
    case BenchOp::kReduceScatterv:
      s.dc->reduceScatterv(a.send, a.recv, a.counts, o.type, o.op, s.stream);
      return;
    case BenchOp::kGatherv:
      s.dc->gatherv(a.send, a.recv, a.counts, {}, o.type, o.root, s.stream);
      return;
    case BenchOp::kScatterv:
      s.dc->scatterv(a.send, a.counts, {}, a.recv, o.type, o.root, s.stream);
      return;
    case BenchOp::kAllToAllv:  // the weights are symmetric: what r sends to q, q sends to r
      s.dc->allToAllv(a.send, a.counts, {}, a.recv, a.counts, {}, o.type, s.stream);
      return;
    case BenchOp::kBarrier:
      s.comm->barrier();
      return;
    default:  // options.cc refuses the others with --device cuda
      throw InvalidArgument(fmt::format("--device cuda: {} has no device form yet", toString(op)));
  }
}

void DeviceSide::synchronize() { state_->dc->synchronize(state_->stream); }

double DeviceSide::timeDeviceCopy(size_t bytes, int iters, int warmup) {
  State& s = *state_;
  if (bytes == 0) return 0;
  for (int i = 0; i < warmup; ++i) {
    check(cudaMemcpyAsync(s.recv, s.send, bytes, cudaMemcpyDeviceToDevice, s.stream),
          "cudaMemcpyAsync");
  }
  synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    check(cudaMemcpyAsync(s.recv, s.send, bytes, cudaMemcpyDeviceToDevice, s.stream),
          "cudaMemcpyAsync");
  }
  synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

std::string DeviceSide::algorithm(BenchOp op, size_t bytes,
                                  const std::function<std::string(size_t)>& host) const {
  const cuda::DeviceCommunicator& dc = *state_->dc;
  // (The v-forms decide on N blocks of their largest block, near their total in this bench's
  // nearly even blocks.)
  switch (dc.pathFor(bytes)) {
    case cuda::DevicePath::kIpc:
      if (dc.blockRoute() == cuda::BlockRoute::kDirect &&
          (op == BenchOp::kAllToAll || op == BenchOp::kAllToAllv || op == BenchOp::kGather ||
           op == BenchOp::kScatter || op == BenchOp::kGatherv || op == BenchOp::kScatterv)) {
        return "cuda_ipc_direct";
      }
      if (dc.chunkRoute() == cuda::BlockRoute::kDirect &&
          (op == BenchOp::kAllreduce || op == BenchOp::kAllgather ||
           op == BenchOp::kReduceScatter)) {
        return "cuda_ipc_direct";
      }
      return op == BenchOp::kBroadcast || op == BenchOp::kReduce || op == BenchOp::kGather ||
                     op == BenchOp::kScatter || op == BenchOp::kGatherv || op == BenchOp::kScatterv
                 ? "cuda_ipc_chain"
                 : "cuda_ipc_ring";
    case cuda::DevicePath::kStaged:
      return "staged_" + host(std::min(bytes, cuda::DeviceOptions::fromEnvironment().chunkBytes));
    case cuda::DevicePath::kAuto:
      break;
  }
  return "auto";
}

std::string DeviceSide::describe() const {
  return fmt::format("cuda device {} ({}), path {}", state_->device, state_->name,
                     cuda::toString(state_->dc->path()));
}

}  // namespace ringlet::bench::device
