#pragma once
// DeviceCommunicator's state and the machinery its collectives share (device_communicator.cc,
// device_reduce_gather.cc): argument checks, the staged pipeline through pinned host memory, and
// the call that runs a slot-ring schedule on the CUDA IPC ring. Private to src/cuda.
//
// The staged pipeline runs the host communicator's collective (any transport: TCP, shared
// memory) on pinned copies of the device buffers, chunk by chunk, with two pinned slots so that
// copies and the host collective overlap. For 3 chunks (D2H = device to host copy into a slot,
// H2D = back; every copy is enqueued on the caller's stream, so the copies run in order):
//
//   host thread                                  GPU copy engine (caller's stream)
//   D2H chunk 0 -> slot 0
//   D2H chunk 1 -> slot 1; wait D2H 0            D2H 0, D2H 1
//   collective on slot 0; H2D slot 0 -> chunk 0  H2D 0
//   wait H2D 0; D2H chunk 2 -> slot 0; wait D2H 1  D2H 2
//   collective on slot 1; H2D slot 1 -> chunk 1  H2D 1
//   wait D2H 2; collective on slot 0; H2D slot 0 -> chunk 2
//   wait H2D 1, H2D 2; return
//
// A slot is reused only after the H2D copy out of it has finished (State::reuse). Every wait is
// on a CUDA event with a deadline. The chunk count depends only on the call's counts, type,
// world size and chunkBytes, so every rank issues the same host collectives; a rank with other
// options gets the host communicator's MismatchError.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "collectives/select.h"
#include "collectives/slot_mesh.h"
#include "collectives/slot_ring.h"
#include "ringlet/cuda.h"
#include "src/core/communicator_access.h"
#include "transports/cuda/ipc_ring.h"

namespace ringlet::cuda {

// Throws CudaError for a stream CUDA does not know, InvalidArgument for one of another device.
void checkStream(void* stream, int device);
// InvalidArgument unless `send` and `recv` (bytes each) are equal or disjoint.
void checkNoPartialOverlap(const void* send, const void* recv, size_t bytes);
// checkDevicePointer, with the call and the rank in front of the message.
void checkDeviceArgument(std::string_view call, int rank, const void* pointer, int device,
                         std::string_view what);

// InvalidArgument naming the call and the rank unless `op` applies to `type`.
void checkOp(const char* call, int rank, DataType type, ReduceOp op);
// InvalidArgument naming the call and the rank unless root is a rank of a world of `size`.
void checkRoot(const char* call, int rank, int root, int size);

// Bytes of all `size` blocks of `blockBytes`; InvalidArgument naming the call when it overflows.
size_t allBlocksBytes(const char* call, int rank, int size, size_t blockBytes);
// Enqueues a device-to-device copy (nothing when dst == src or bytes is 0); `what` names it in
// an error.
void copyOnDevice(void* dst, const void* src, size_t bytes, void* stream, const char* what);

// Chunk i of `count` elements cut into chunks of `per`.
struct Chunks {
  size_t count;
  size_t per;
  size_t number() const { return std::max<size_t>(1, (count + per - 1) / per); }
  size_t offset(size_t i) const { return i * per; }
  size_t size(size_t i) const { return std::min(per, count - std::min(count, offset(i))); }
};

// Which blocks of a call with one block per rank a side copies through the slot: none, this
// rank's block only (a buffer of one block), or every block (size() blocks, rank q's at q).
enum class Blocks { kNone, kOwn, kAll };
struct BlockBuffers {
  const std::byte* in = nullptr;  // copied into the slot before the host call
  Blocks inBlocks = Blocks::kNone;
  std::byte* out = nullptr;  // the slot is copied back to it after the host call
  Blocks outBlocks = Blocks::kNone;
  bool separateOut = false;  // the host call needs a second slot area to write to (all-to-all)
};

// A v-form's device buffers for the staged pipeline (runVBlocks): which blocks this rank copies
// into the slot (`in`) and back out of it (`out`). kOwn: the pointer is this rank's block alone;
// kAll: block q lies at element displs[q] of the pointer.
struct VBuffers {
  const std::byte* in = nullptr;
  std::span<const size_t> inDispls;
  Blocks inBlocks = Blocks::kNone;
  std::byte* out = nullptr;
  std::span<const size_t> outDispls;
  Blocks outBlocks = Blocks::kNone;
};

// Copies of one row up to this size go as two rows (copy2DAsync).
inline constexpr size_t kSmallCopyBytes = 64 << 10;

// Enqueues a copy of `height` rows of `width` bytes on `stream` (nothing when either is 0; one
// row: the pitches unused, and from 2 bytes to kSmallCopyBytes it goes as two rows, which do not
// wait for the process's time slice on a shared GPU).
void copy2DAsync(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width,
                 size_t height, cudaMemcpyKind kind, cudaStream_t stream);

struct PinnedMemory {
  void* data = nullptr;
  size_t bytes = 0;
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() {
    if (data) cudaFreeHost(data);
  }
};

// Device memory for one call, allocated and freed in order on the call's stream from the
// communicator's pool (State::scratchPool): the free, queued after the call's work, waits for it,
// and the pool keeps the memory for the next call instead of returning it at each synchronize.
struct StreamScratch {
  std::byte* data = nullptr;
  cudaStream_t stream = nullptr;

  StreamScratch() = default;
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    if (data != nullptr) cudaFreeAsync(data, stream);
  }
  // `what` names the use in an error ("in-place all-to-all").
  void allocate(cudaMemPool_t pool, size_t bytes, void* on, const char* what);
};

// What a staged call does with chunk i in pinned slot memory `slot`: copyIn and copyOut only
// enqueue copies on the stream (null: that side has none); hostOp runs the host collective.
struct StagedSteps {
  size_t chunks = 1;
  size_t slotBytes = 0;  // pinned bytes one chunk needs
  std::function<void(size_t i, std::byte* slot, cudaStream_t stream)> copyIn;
  std::function<void(size_t i, std::byte* slot)> hostOp;
  std::function<void(size_t i, std::byte* slot, cudaStream_t stream)> copyOut;
};

// The IPC path's schedules, as the call header and trace mode name them.
inline constexpr auto kIpcRing = static_cast<uint8_t>(collectives::Algorithm::kRing);
inline constexpr auto kIpcChain = static_cast<uint8_t>(collectives::Algorithm::kChain);
inline constexpr auto kIpcPairwise = static_cast<uint8_t>(collectives::Algorithm::kPairwise);
inline constexpr auto kIpcLinear = static_cast<uint8_t>(collectives::Algorithm::kLinear);

struct DeviceCommunicator::State {
  Communicator* host = nullptr;
  int device = 0;
  DeviceOptions options;
  DevicePath chosen = DevicePath::kAuto;  // decided by the first collective
  bool oneGpu = false;                    // IPC: every rank uses this one GPU (agreed)
  std::unique_ptr<transport::cuda::IpcRing> ipc;
  // The direct all-to-all's slots (transport::cuda::IpcMesh), set up at the first IPC
  // all-to-all that takes them; meshTried: that setup ran (mesh null: not possible here).
  std::unique_ptr<transport::cuda::IpcMesh> mesh;
  bool meshTried = false;
  PinnedMemory pinned;  // two slots of slotBytes
  size_t slotBytes = 0;
  std::array<cudaEvent_t, 2> copiedIn{};   // D2H into slot k finished
  std::array<cudaEvent_t, 2> copiedOut{};  // H2D out of slot k finished
  std::array<bool, 2> outPending{};        // an H2D out of slot k may still run

  cudaMemPool_t pool = nullptr;  // scratchPool(), made on first use

  ~State();

  // The memory pool of this communicator's scratch memory on its device (StreamScratch): it
  // keeps what it allocated (no release threshold) until the communicator goes.
  cudaMemPool_t scratchPool();

  std::byte* slot(int k) const { return static_cast<std::byte*>(pinned.data) + k * slotBytes; }
  void ensurePinned(size_t bytes);
  std::string describeWait(std::string_view op, std::string_view what, size_t chunk,
                           size_t chunks) const;
  void wait(cudaEvent_t event, const std::function<std::string()>& what) const;
  // Waits until no copy reads slot k any more.
  void reuse(int k, std::string_view op, size_t chunk, size_t chunks);
  // Best effort after a failure: the pinned slots must not be freed or refilled under a copy.
  void drain() noexcept;

  // Elements per staged chunk of `type` when a chunk holds `perChunk` pieces of that many
  // elements each (1 for a contiguous buffer, the world size for per-rank blocks).
  size_t chunkElements(DataType type, size_t perChunk) const;

  // The staged pipeline, chunk by chunk as drawn at the top of this file.
  void pipeline(std::string_view op, void* stream, const StagedSteps& steps);

  // The pipeline on one contiguous buffer. `in`: device memory copied into each slot before
  // `hostOp` (null: none); `out`: device memory the slot is copied back to afterwards (null:
  // none).
  void run(std::string_view op, const std::byte* in, std::byte* out, size_t count, DataType type,
           void* stream, const std::function<void(std::byte* slot, size_t count)>& hostOp);

  // The pipeline on a call with one block of `blockCount` elements per rank (all-gather,
  // reduce-scatter, gather, scatter, all-to-all): chunk i is the same columns of every block
  // (drawn in device_reduce_gather.cc), laid out in the slot as size() blocks of n elements.
  // hostOp(slot, out, n) runs the host call on it; `out` is the slot itself, or the second area
  // of as many blocks when buffers.separateOut.
  void runBlocks(std::string_view op, void* stream, size_t blockCount, DataType type,
                 const BlockBuffers& buffers,
                 const std::function<void(std::byte* slot, std::byte* out, size_t n)>& hostOp);

  // The pipeline on a v-form (one block per rank of counts[q] elements, uneven): chunk i is
  // elements [i * c, (i + 1) * c) of every block (c = chunkElements(type, ranks)), packed in rank
  // order in the slot. `outCounts` are the blocks of the area the host call writes when it
  // differs from the one it reads (all-to-all-v: a second area of the slot; empty: the same area
  // and counts). hostOp(slot, out, inCounts, outCounts) runs the host v-form on chunk i's pieces.
  // `maxCount` (the largest block on any rank) sets the chunk count, so every rank must pass the
  // same one.
  void runVBlocks(
      std::string_view op, void* stream, DataType type, size_t maxCount,
      std::span<const size_t> counts, std::span<const size_t> outCounts, const VBuffers& buffers,
      const std::function<void(std::byte* slot, std::byte* out, std::span<const size_t> inCounts,
                               std::span<const size_t> outCounts)>& hostOp);

  using IpcBody = std::function<void(const collectives::Group&, const collectives::SlotRingMemory&,
                                     collectives::SlotExecutor&, const transport::WaitContext&)>;

  // Whether a call that moves `bytes` (the larger of its input and output) takes the IPC ring:
  // on the IPC path, unless every rank shares one GPU and it is smaller than
  // options.stagedBelowBytes x (ranks - 1). The same on every rank for the same call.
  bool useIpc(size_t bytes) const {
    if (chosen != DevicePath::kIpc) return false;
    if (!oneGpu) return true;
    const auto peers = static_cast<size_t>(host->size() - 1);
    return options.stagedBelowBytes == 0 || bytes / peers >= options.stagedBelowBytes;
  }

  // Whether this IPC call goes direct (options.blockRoute): all-to-all, gather, scatter and
  // their v-forms; with `wholeBuffer`, all-reduce, all-gather, reduce-scatter (and v-forms), which
  // under kAuto go direct only where every rank shares one GPU (there each of the ring's steps
  // waits for a time slice; across GPUs the ring is the tried one). The first time, sets up the
  // mesh in one call of the host communicator (every rank does, at the same call). kDirect where
  // some rank cannot write into another's GPU: InvalidArgument naming why.
  bool useMesh(bool wholeBuffer = false);
  // Whether those calls go along the ring without asking: options.blockRoute kRing, or kAuto at
  // two ranks (the ring's one link is the pair: the same copies, no more memory).
  bool alongTheRing() const {
    return options.blockRoute == BlockRoute::kRing ||
           (options.blockRoute == BlockRoute::kAuto && host->size() == 2);
  }
  using MeshBody =
      std::function<void(const collectives::Group&, const collectives::SlotMeshMemory&,
                         collectives::SlotMeshExecutor&, const transport::WaitContext&)>;
  // Runs `body` on the mesh as one call of the host communicator (header.algorithm: the
  // schedule's name), enqueuing on `stream`.
  void runMesh(detail::OpHeader header, void* stream, const MeshBody& body);
  // The same with one of the mesh's schedules (slotMeshAllToAll, slotMeshGather, ...).
  template <typename Args>
  void runMesh(detail::OpHeader header, void* stream,
               void (*schedule)(const collectives::Group&, const collectives::SlotMeshMemory&,
                                collectives::SlotMeshExecutor&, const Args&,
                                const transport::WaitContext&),
               const Args& args) {
    runMesh(header, stream,
            [&](const collectives::Group& group, const collectives::SlotMeshMemory& memory,
                collectives::SlotMeshExecutor& executor, const transport::WaitContext& wait) {
              schedule(group, memory, executor, args, wait);
            });
  }

  // A call with both IPC routes: `direct` on the mesh with header.algorithm = `directAlgorithm`
  // where useMesh(wholeBuffer) says so, else `ring` on the IPC ring with header as given.
  template <typename Args>
  void runRoute(detail::OpHeader header, void* stream, const Args& args,
                void (*ring)(const collectives::Group&, const collectives::SlotRingMemory&,
                             collectives::SlotExecutor&, const Args&,
                             const transport::WaitContext&),
                void (*direct)(const collectives::Group&, const collectives::SlotMeshMemory&,
                               collectives::SlotMeshExecutor&, const Args&,
                               const transport::WaitContext&),
                uint8_t directAlgorithm, bool wholeBuffer = false) {
    if (useMesh(wholeBuffer)) {
      header.algorithm = directAlgorithm;
      runMesh(header, stream, direct, args);
    } else {
      runIpc(header, stream, ring, args);
    }
  }

  // Runs `body` on the IPC ring as one call of the host communicator (header check with the
  // memory kind, sequence number, deadlines, abort), enqueuing on `stream`.
  void runIpc(detail::OpHeader header, void* stream, const IpcBody& body);
  // The same with one of the slot ring's schedules (slotRingAllreduce, slotRingReduce, ...) on
  // its arguments.
  template <typename Args>
  void runIpc(detail::OpHeader header, void* stream,
              void (*schedule)(const collectives::Group&, const collectives::SlotRingMemory&,
                               collectives::SlotExecutor&, const Args&,
                               const transport::WaitContext&),
              const Args& args) {
    runIpc(header, stream,
           [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
               collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
             schedule(group, memory, executor, args, wait);
           });
  }
};

}  // namespace ringlet::cuda
