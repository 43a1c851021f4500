#pragma once
// Shared cases of the device-memory tests: one all-reduce, broadcast, reduce, all-gather or
// reduce-scatter on device memory, checked on the host against the same expected values as the
// host collectives' matrix.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "tests/collectives/data.h"

namespace ringlet::testing::cuda_cases {

inline constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                      DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                      DataType::kInt32,    DataType::kInt64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DeviceBytes {
  std::byte* data = nullptr;
  explicit DeviceBytes(size_t bytes) { check(cudaMalloc(&data, bytes + 16), "cudaMalloc"); }
  ~DeviceBytes() { cudaFree(data); }
};

inline void allreduceCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          ReduceOp op, size_t count, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "allreduce " << toString(type) << " " << toString(op)
                                    << " count " << count << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t bytes = count * elementSize(type);
  const auto input = makeInput(type, count, rank, op);
  DeviceBytes send(bytes), recv(bytes);
  check(cudaMemcpy(send.data, input.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  // Work already on the stream before the call must be seen by it: a memset then the input.
  check(cudaMemsetAsync(recv.data, 0xff, bytes, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data : recv.data;
  device.allreduce(send.data, out, count, type, op, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (size_t j = 0; j < count; ++j) {
    const double want = expectedAllreduce(type, op, size, j);
    const double have = loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

inline void broadcastCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          size_t count, int root) {
  SCOPED_TRACE(::testing::Message()
               << "broadcast " << toString(type) << " count " << count << " root " << root);
  const int rank = device.host().rank();
  const size_t bytes = count * elementSize(type);
  const auto mine = makeInput(type, count, rank, ReduceOp::kSum);
  const auto want = makeInput(type, count, root, ReduceOp::kSum);
  DeviceBytes buffer(bytes);
  check(cudaMemcpy(buffer.data, mine.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  device.broadcast(buffer.data, count, type, root, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMemcpy(got.data(), buffer.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
}

// Reduce to `root`: the root's recv holds the all-reduce result; elsewhere recv (filled with
// 0xff) is not touched.
inline void reduceCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                       ReduceOp op, size_t count, int root, bool inPlace) {
  SCOPED_TRACE(::testing::Message()
               << "reduce " << toString(type) << " " << toString(op) << " count " << count
               << " root " << root << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t bytes = count * elementSize(type);
  const auto input = makeInput(type, count, rank, op);
  DeviceBytes send(bytes), recv(bytes);
  check(cudaMemcpy(send.data, input.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, bytes, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data : recv.data;
  device.reduce(send.data, out, count, type, op, root, stream);
  std::vector<std::byte> got(bytes + 1);
  check(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (rank != root) {
    const std::vector<std::byte> untouched =
        inPlace ? input : std::vector<std::byte>(bytes + 1, std::byte{0xff});
    EXPECT_EQ(std::memcmp(got.data(), untouched.data(), bytes), 0) << "buffer changed off the root";
    return;
  }
  for (size_t j = 0; j < count; ++j) {
    const double want = expectedAllreduce(type, op, size, j);
    const double have = loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

// All-gather: block q of recv is rank q's input.
inline void allgatherCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          size_t sendCount, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "allgather " << toString(type) << " sendCount " << sendCount
                                    << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t blockBytes = sendCount * elementSize(type);
  const size_t totalBytes = blockBytes * static_cast<size_t>(size);
  const auto input = makeInput(type, sendCount, rank, ReduceOp::kSum);
  DeviceBytes send(blockBytes), recv(totalBytes);
  std::byte* own = recv.data + rank * blockBytes;
  check(cudaMemsetAsync(recv.data, 0xff, totalBytes, stream), "cudaMemsetAsync");
  check(cudaMemcpyAsync(inPlace ? own : send.data, input.data(), blockBytes, cudaMemcpyHostToDevice,
                        stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // input is on the stack
  device.allgather(inPlace ? own : send.data, recv.data, sendCount, type, stream);
  std::vector<std::byte> got(totalBytes + 1);
  check(cudaMemcpyAsync(got.data(), recv.data, totalBytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (int q = 0; q < size; ++q) {
    const auto want = makeInput(type, sendCount, q, ReduceOp::kSum);
    EXPECT_EQ(std::memcmp(got.data() + q * blockBytes, want.data(), blockBytes), 0)
        << "block " << q;
  }
}

// Reduce-scatter: rank r's recv is block r of the all-reduce result of every rank's send.
inline void reduceScatterCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                              ReduceOp op, size_t recvCount, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "reduce_scatter " << toString(type) << " " << toString(op)
                                    << " recvCount " << recvCount << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t blockBytes = recvCount * elementSize(type);
  const size_t totalBytes = blockBytes * static_cast<size_t>(size);
  const auto input = makeInput(type, recvCount * size, rank, op);
  DeviceBytes send(totalBytes), recv(blockBytes);
  check(cudaMemcpy(send.data, input.data(), totalBytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, blockBytes, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data + rank * blockBytes : recv.data;
  device.reduceScatter(send.data, out, recvCount, type, op, stream);
  std::vector<std::byte> got(blockBytes + 1);
  check(cudaMemcpyAsync(got.data(), out, blockBytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (size_t j = 0; j < recvCount; ++j) {
    const double want = expectedAllreduce(type, op, size, rank * recvCount + j);
    const double have = loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

// Every type and op of all-reduce in and out of place, counts from zero to many chunks or slots;
// broadcasts from every root; then an all-reduce on the default stream.
inline void allreduceBroadcastMatrix(cuda::DeviceCommunicator& device, cudaStream_t stream) {
  const int size = device.host().size();
  const size_t n = static_cast<size_t>(size);
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
      for (size_t count : {size_t{0}, size_t{1}, n + 1, size_t{4099}, size_t{100003}}) {
        for (bool inPlace : {false, true}) allreduceCase(device, stream, type, op, count, inPlace);
      }
    }
  }
  for (size_t count : {size_t{0}, size_t{1}, size_t{100003}}) {
    for (int root = 0; root < size; ++root)
      broadcastCase(device, stream, DataType::kInt32, count, root);
  }
  allreduceCase(device, nullptr, DataType::kFloat32, ReduceOp::kSum, 4099, false);
}

// Every type and op of reduce, all-gather and reduce-scatter, in and out of place, counts from
// zero to several chunks or slots per block.
inline void reduceGatherScatterMatrix(cuda::DeviceCommunicator& device, cudaStream_t stream) {
  const int size = device.host().size();
  const size_t n = static_cast<size_t>(size);
  const size_t counts[] = {0, 1, n + 1, 4099, 30011};
  int i = 0;
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
      for (size_t count : counts) {
        const bool inPlace = i++ % 2 == 1;
        reduceCase(device, stream, type, op, count, i % size, inPlace);
        reduceScatterCase(device, stream, type, op, count, inPlace);
        reduceScatterCase(device, stream, type, op, count, !inPlace);
      }
    }
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) allgatherCase(device, stream, type, count, inPlace);
    }
  }
  for (int root = 0; root < size; ++root) {
    for (bool inPlace : {false, true})
      reduceCase(device, stream, DataType::kFloat32, ReduceOp::kSum, 100003, root, inPlace);
  }
}

// Copies `bytes` of device memory to a host vector after the stream's work.
inline std::vector<std::byte> download(const std::byte* from, size_t bytes, cudaStream_t stream) {
  std::vector<std::byte> got(bytes + 1);
  check(cudaMemcpyAsync(got.data(), from, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return got;
}

// Gather: block q of the root's recv is rank q's input; other ranks pass a null recv.
inline void gatherCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                       size_t count, int root, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "gather " << toString(type) << " count " << count << " root "
                                    << root << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t blockBytes = count * elementSize(type);
  const size_t totalBytes = blockBytes * static_cast<size_t>(size);
  const auto input = makeInput(type, count, rank, ReduceOp::kSum);
  DeviceBytes send(blockBytes), recv(totalBytes);
  const bool isRoot = rank == root;
  std::byte* from = inPlace && isRoot ? recv.data + rank * blockBytes : send.data;
  check(cudaMemsetAsync(recv.data, 0xff, totalBytes, stream), "cudaMemsetAsync");
  check(cudaMemcpyAsync(from, input.data(), blockBytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // input is on the stack
  device.gather(from, isRoot ? recv.data : nullptr, count, type, root, stream);
  if (!isRoot) {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return;
  }
  const auto got = download(recv.data, totalBytes, stream);
  for (int q = 0; q < size; ++q) {
    const auto want = makeInput(type, count, q, ReduceOp::kSum);
    EXPECT_EQ(std::memcmp(got.data() + q * blockBytes, want.data(), blockBytes), 0)
        << "block " << q;
  }
}

// Scatter: rank r's recv is block r of the root's input; other ranks pass a null send.
inline void scatterCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                        size_t count, int root, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "scatter " << toString(type) << " count " << count
                                    << " root " << root << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t blockBytes = count * elementSize(type);
  const size_t totalBytes = blockBytes * static_cast<size_t>(size);
  const auto input = makeInput(type, count * size, root, ReduceOp::kSum);
  DeviceBytes send(totalBytes), recv(blockBytes);
  const bool isRoot = rank == root;
  std::byte* to = inPlace && isRoot ? send.data + rank * blockBytes : recv.data;
  check(cudaMemcpy(send.data, input.data(), totalBytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (to == recv.data) check(cudaMemsetAsync(recv.data, 0xff, blockBytes, stream), "cudaMemset");
  device.scatter(isRoot ? send.data : nullptr, to, count, type, root, stream);
  const auto got = download(to, blockBytes, stream);
  EXPECT_EQ(std::memcmp(got.data(), input.data() + rank * blockBytes, blockBytes), 0);
}

// All-to-all: block q of rank r's recv is block r of rank q's input.
inline void allToAllCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                         size_t count, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "all_to_all " << toString(type) << " count " << count
                                    << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t blockBytes = count * elementSize(type);
  const size_t totalBytes = blockBytes * static_cast<size_t>(size);
  const auto input = makeInput(type, count * size, rank, ReduceOp::kSum);
  DeviceBytes send(totalBytes), recv(totalBytes);
  std::byte* out = inPlace ? send.data : recv.data;
  check(cudaMemcpy(send.data, input.data(), totalBytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, totalBytes, stream), "cudaMemsetAsync");
  device.allToAll(send.data, out, count, type, stream);
  const auto got = download(out, totalBytes, stream);
  for (int q = 0; q < size; ++q) {
    const auto theirs = makeInput(type, count * size, q, ReduceOp::kSum);
    EXPECT_EQ(
        std::memcmp(got.data() + q * blockBytes, theirs.data() + rank * blockBytes, blockBytes), 0)
        << "block " << q;
  }
}

// Gather, scatter and all-to-all, every type, in and out of place, every root, counts from zero
// to several chunks per block.
inline void gatherScatterAllToAllMatrix(cuda::DeviceCommunicator& device, cudaStream_t stream) {
  const int size = device.host().size();
  const size_t n = static_cast<size_t>(size);
  int i = 0;
  for (DataType type : kTypes) {
    for (size_t count : {size_t{0}, size_t{1}, n + 1, size_t{4099}, size_t{30011}}) {
      const bool inPlace = i++ % 2 == 1;
      const int root = i % size;
      gatherCase(device, stream, type, count, root, inPlace);
      scatterCase(device, stream, type, count, root, inPlace);
      allToAllCase(device, stream, type, count, inPlace);
      allToAllCase(device, stream, type, count, !inPlace);
    }
  }
}

// The v-forms' layouts: rank q's block holds vCount(base, q) elements (every third rank none),
// and with gaps its block sits in reverse rank order with two elements between blocks (recv
// elements in the gaps must stay untouched); without gaps the displacements are empty (packed).
inline size_t vCount(size_t base, int q) { return q % 3 == 1 ? 0 : base + q * (base / 3 + 1); }
struct VLayout {
  std::vector<size_t> counts, displs;  // displs empty: packed
  std::vector<size_t> at;              // where each block starts, in elements
  size_t extent = 0;                   // elements the buffer needs
};
inline VLayout vLayout(std::vector<size_t> counts, bool gaps) {
  VLayout l;
  l.counts = std::move(counts);
  const size_t n = l.counts.size();
  l.at.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const size_t q = gaps ? n - 1 - k : k;
    l.at[q] = l.extent + (gaps ? 2 : 0);
    l.extent = l.at[q] + l.counts[q];
  }
  if (gaps) l.displs = l.at;
  return l;
}
inline VLayout vLayout(size_t base, int size, bool gaps) {
  std::vector<size_t> counts;
  for (int q = 0; q < size; ++q) counts.push_back(vCount(base, q));
  return vLayout(std::move(counts), gaps);
}

// Bytes [from, to) of `got` are all 0xff (elements a call must leave untouched).
inline void expectUntouched(const std::vector<std::byte>& got, size_t from, size_t to,
                            const char* what) {
  for (size_t k = from; k < to; ++k) {
    if (got[k] != std::byte{0xff}) {
      ADD_FAILURE() << what << ": byte " << k << " changed";
      return;
    }
  }
}

// Checks the blocks of `got` (laid out as `l`) against block q = `want(q)`, and that the gaps
// between them are untouched.
template <typename Want>
void expectBlocks(const std::vector<std::byte>& got, const VLayout& l, DataType type, Want want) {
  const size_t eb = elementSize(type);
  std::vector<bool> covered(l.extent, false);
  for (size_t q = 0; q < l.counts.size(); ++q) {
    const std::vector<std::byte> w = want(static_cast<int>(q));
    EXPECT_EQ(std::memcmp(got.data() + l.at[q] * eb, w.data(), l.counts[q] * eb), 0)
        << "block " << q;
    for (size_t j = 0; j < l.counts[q]; ++j) covered[l.at[q] + j] = true;
  }
  for (size_t j = 0; j < l.extent; ++j) {
    if (!covered[j]) expectUntouched(got, j * eb, (j + 1) * eb, "gap between blocks");
  }
}

// All-gather-v: block q of recv is rank q's input; in place, send is this rank's block of recv.
inline void allgathervCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                           size_t base, bool gaps, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "allgatherv " << toString(type) << " base " << base
                                    << (gaps ? " gaps" : "") << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const size_t eb = elementSize(type);
  const VLayout l = vLayout(base, device.host().size(), gaps);
  const auto input = makeInput(type, l.counts[rank], rank, ReduceOp::kSum);
  DeviceBytes send(input.size()), recv(l.extent * eb);
  check(cudaMemsetAsync(recv.data, 0xff, l.extent * eb, stream), "cudaMemsetAsync");
  std::byte* from = inPlace ? recv.data + l.at[rank] * eb : send.data;
  check(cudaMemcpyAsync(from, input.data(), l.counts[rank] * eb, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // input is on the stack
  device.allgatherv(from, recv.data, l.counts, l.displs, type, stream);
  expectBlocks(download(recv.data, l.extent * eb, stream), l, type,
               [&](int q) { return makeInput(type, l.counts[q], q, ReduceOp::kSum); });
}

// Reduce-scatter-v: rank r's recv is its block (packed in send) of the all-reduce result.
inline void reduceScattervCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                               ReduceOp op, size_t base, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "reduce_scatterv " << toString(type) << " " << toString(op)
                                    << " base " << base << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t eb = elementSize(type);
  const VLayout l = vLayout(base, size, false);
  const auto input = makeInput(type, l.extent, rank, op);
  DeviceBytes send(input.size()), recv(l.counts[rank] * eb);
  check(cudaMemcpy(send.data, input.data(), input.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, l.counts[rank] * eb, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data + l.at[rank] * eb : recv.data;
  device.reduceScatterv(send.data, out, l.counts, type, op, stream);
  const auto got = download(out, l.counts[rank] * eb, stream);
  for (size_t j = 0; j < l.counts[rank]; ++j) {
    const double want = expectedAllreduce(type, op, size, l.at[rank] + j);
    const double have = loadValue(type, got.data(), j);
    if (have != want) {
      ADD_FAILURE() << "element " << j << ": got " << have << ", want " << want;
      return;
    }
  }
}

// Gather-v: the root's recv holds rank q's input at block q; other ranks pass a null recv.
inline void gathervCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                        size_t base, int root, bool gaps, bool inPlace) {
  SCOPED_TRACE(::testing::Message()
               << "gatherv " << toString(type) << " base " << base << " root " << root
               << (gaps ? " gaps" : "") << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const size_t eb = elementSize(type);
  const VLayout l = vLayout(base, device.host().size(), gaps);
  const bool isRoot = rank == root;
  const auto input = makeInput(type, l.counts[rank], rank, ReduceOp::kSum);
  DeviceBytes send(input.size()), recv(l.extent * eb);
  check(cudaMemsetAsync(recv.data, 0xff, l.extent * eb, stream), "cudaMemsetAsync");
  std::byte* from = inPlace && isRoot ? recv.data + l.at[rank] * eb : send.data;
  check(cudaMemcpyAsync(from, input.data(), l.counts[rank] * eb, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  device.gatherv(from, isRoot ? recv.data : nullptr, l.counts, l.displs, type, root, stream);
  const auto got = download(recv.data, l.extent * eb, stream);
  if (!isRoot) return expectUntouched(got, 0, l.extent * eb, "recv off the root");
  expectBlocks(got, l, type,
               [&](int q) { return makeInput(type, l.counts[q], q, ReduceOp::kSum); });
}

// Scatter-v: rank r's recv is the root's block r; other ranks pass a null send.
inline void scattervCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                         size_t base, int root, bool gaps, bool inPlace) {
  SCOPED_TRACE(::testing::Message()
               << "scatterv " << toString(type) << " base " << base << " root " << root
               << (gaps ? " gaps" : "") << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const size_t eb = elementSize(type);
  const VLayout l = vLayout(base, device.host().size(), gaps);
  const bool isRoot = rank == root;
  const auto input = makeInput(type, l.extent, root, ReduceOp::kSum);
  DeviceBytes send(input.size()), recv(l.counts[rank] * eb);
  check(cudaMemcpy(send.data, input.data(), input.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, l.counts[rank] * eb, stream), "cudaMemsetAsync");
  std::byte* to = inPlace && isRoot ? send.data + l.at[rank] * eb : recv.data;
  device.scatterv(isRoot ? send.data : nullptr, l.counts, l.displs, to, type, root, stream);
  const auto got = download(to, l.counts[rank] * eb, stream);
  EXPECT_EQ(std::memcmp(got.data(), input.data() + l.at[rank] * eb, l.counts[rank] * eb), 0);
}

// All-to-all-v: rank p sends vPair(base, p, q) elements to rank q; block q of rank r's recv is
// the block for r in rank q's send (rank q's input at that block's place).
inline size_t vPair(size_t base, int p, int q) {
  return (p * 3 + q * 5) % 4 == 1 ? 0 : base + static_cast<size_t>(p + 2 * q);
}
inline void allToAllvCase(cuda::DeviceCommunicator& device, cudaStream_t stream, DataType type,
                          size_t base, bool gaps, bool inPlace) {
  SCOPED_TRACE(::testing::Message() << "alltoallv " << toString(type) << " base " << base
                                    << (gaps ? " gaps" : "") << (inPlace ? " in place" : ""));
  const int rank = device.host().rank();
  const int size = device.host().size();
  const size_t eb = elementSize(type);
  // In place needs the same layout both ways: every pair sends as many each way.
  auto pair = [&](int p, int q) {
    return inPlace ? vPair(base, std::min(p, q), std::max(p, q)) : vPair(base, p, q);
  };
  auto sendLayout = [&](int p) {
    std::vector<size_t> counts;
    for (int q = 0; q < size; ++q) counts.push_back(pair(p, q));
    return vLayout(std::move(counts), gaps);
  };
  std::vector<size_t> recvCounts;
  for (int q = 0; q < size; ++q) recvCounts.push_back(pair(q, rank));
  const VLayout sl = sendLayout(rank);
  const VLayout rl = vLayout(recvCounts, gaps);
  const auto input = makeInput(type, sl.extent, rank, ReduceOp::kSum);
  DeviceBytes send(input.size()), recv(rl.extent * eb);
  check(cudaMemcpy(send.data, input.data(), input.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemsetAsync(recv.data, 0xff, rl.extent * eb, stream), "cudaMemsetAsync");
  std::byte* out = inPlace ? send.data : recv.data;
  device.allToAllv(send.data, sl.counts, sl.displs, out, rl.counts, rl.displs, type, stream);
  const auto got = download(out, rl.extent * eb, stream);
  for (int q = 0; q < size; ++q) {
    const VLayout theirs = sendLayout(q);
    const auto theirInput = makeInput(type, theirs.extent, q, ReduceOp::kSum);
    EXPECT_EQ(std::memcmp(got.data() + rl.at[q] * eb, theirInput.data() + theirs.at[rank] * eb,
                          rl.counts[q] * eb),
              0)
        << "block " << q;
  }
}

// The v-forms, every type (reduce-scatter-v every op), in and out of place, packed and with
// gaps, every root, blocks from none to several chunks.
inline void vFormsMatrix(cuda::DeviceCommunicator& device, cudaStream_t stream) {
  const int size = device.host().size();
  int i = 0;
  for (DataType type : kTypes) {
    for (size_t base : {size_t{0}, size_t{1}, static_cast<size_t>(size) + 1, size_t{4099}}) {
      const bool inPlace = i++ % 2 == 1;
      const bool gaps = i % 3 != 0;
      const int root = i % size;
      allgathervCase(device, stream, type, base, gaps, inPlace);
      gathervCase(device, stream, type, base, root, gaps, !inPlace);
      scattervCase(device, stream, type, base, root, gaps, inPlace);
      allToAllvCase(device, stream, type, base, gaps, inPlace);
      allToAllvCase(device, stream, type, base, !gaps, !inPlace);
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(type)) continue;
        reduceScattervCase(device, stream, type, op, base, inPlace);
      }
    }
  }
  allgathervCase(device, nullptr, DataType::kFloat32, 30011, true, false);
  reduceScattervCase(device, nullptr, DataType::kFloat32, ReduceOp::kSum, 30011, false);
  allToAllvCase(device, nullptr, DataType::kFloat32, 30011, true, false);
}

}  // namespace ringlet::testing::cuda_cases
