#pragma once
// Collectives on CUDA device memory.
//
// Memory kind. Communicator's collectives take host memory. DeviceCommunicator takes CUDA device
// memory (cudaMalloc, or managed memory) on one device ordinal, fixed when it is made; every
// pointer is checked with cudaPointerGetAttributes before anything is sent:
//  - host memory (pageable or pinned) passed as device memory -> InvalidArgument naming the
//    argument, the pointer and what it is;
//  - device memory of another device -> InvalidArgument naming both ordinals;
//  - a stream that CUDA reports as bad -> CudaError with CUDA's error string; a stream of another
//    device -> InvalidArgument naming both ordinals. (A destroyed stream's handle is a dangling
//    pointer: CUDA 13 crashes inside cudaStreamQuery on one, so it cannot be detected.)
// Like Communicator, every rank must issue the same sequence of calls with the same counts.
//
// Streams. Each call takes the caller's cudaStream_t (as void*; nullptr is the legacy default
// stream). Work the caller enqueued on that stream before the call is seen by the collective, and
// work enqueued after the call returns sees its result, as with NCCL. The collective reads and
// writes the caller's buffers only from that stream. Two paths, chosen once per
// DeviceCommunicator at its first collective (DeviceOptions::path, RINGLET_CUDA_PATH), the same
// on every rank:
//
// CUDA IPC ("ipc"; auto picks it when every rank is a separate process of one node and each rank
// can reach the next rank's GPU: the same GPU, or peer access between two). Each rank exports
// `slots` receive slots of `slotBytes` in its device memory and CUDA events; the previous rank's
// kernels write straight into them (collectives/slot_ring.h, transports/cuda/); at 3 or more
// ranks the calls that move blocks between every pair (all-to-all, gather, scatter, and on one
// shared GPU all-reduce, all-gather, reduce-scatter) write them straight into slots each rank
// keeps for each peer instead (DeviceOptions::blockRoute, collectives/slot_mesh.h). The call only
// enqueues: copies, reduction kernels and cross-process event waits go on the stream, and the
// call returns without waiting for the GPU. What the host call waits for: its neighbours'
// *host* threads to have enqueued the matching steps (24-byte notices over the host links, each
// wait with options.timeout), never for GPU work; a rank's host runs at most `slots` slices ahead
// of its neighbours' (direct: 2 slices ahead of each peer). So all ranks must make the call (as
// for every collective), but none waits for another's GPU.
//
// Staged ("staged"; auto picks it otherwise: ranks on several hosts, or thread ranks of one
// process): device buffers go through pinned host memory in chunks of options.chunkBytes, over
// the host communicator's transports (TCP, shared memory). The call waits on the host: it
//   1. enqueues device-to-host copies of the input on the stream, into two pinned slots, and
//      waits for each chunk's copy (so it also waits for work enqueued before the call);
//   2. runs the host collective on each pinned chunk while the next chunk's copy runs;
//   3. enqueues the host-to-device copy of each reduced chunk on the stream, and before
//      returning waits until the last of them has finished.
// So when a staged call returns the result is in device memory. Code that relies only on stream
// order is correct with both paths.
//
// A GPU stream never waits for something not yet enqueued: a cross-process event wait is
// enqueued only after the notice that the peer recorded it. If a peer process dies after it
// enqueued its part, work on this rank's stream may never finish; synchronize() waits for a
// stream with the deadline instead of hanging.
//
// Errors. A failed CUDA call throws CudaError naming the call and CUDA's error name and string.
// A wait for a copy has a deadline (options.timeout) and throws TimeoutError naming the rank,
// the operation and the device. Transport errors are those of Communicator. After a CudaError the
// CUDA context may be unusable (sticky errors), as for any CUDA program.
//
// Threads. One DeviceCommunicator per Communicator, used from one thread at a time. It borrows
// the Communicator, which must outlive it. Device calls take their place in the Communicator's
// sequence of calls, with the same checks: a rank that calls a device collective where another
// calls a host one gets MismatchError naming both. Calls set the current device for their duration
// and restore the caller's current device before returning.
//
// Without CUDA (built with -DRINGLET_CUDA=OFF, or no toolkit found) this header still compiles
// and links: deviceCount() is 0 with a reason, and making a DeviceCommunicator throws CudaError.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ringlet/communicator.h"
#include "ringlet/types.h"

namespace ringlet::cuda {

// True when this ringlet was built with CUDA support.
bool builtWithCuda();

// Number of CUDA devices this process sees. 0 when there is none, when the driver cannot start,
// or when ringlet was built without CUDA; then `reason` (if given) says why, e.g.
// "cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected".
// Note: this initialises the CUDA runtime; a process that forks children which use CUDA must
// not call it (or any CUDA function) before forking.
int deviceCount(std::string* reason = nullptr);

enum class MemoryKind : uint8_t {
  kHost = 0,  // pageable or pinned host memory, or anything CUDA does not know
  kCuda = 1,  // device memory (cudaMalloc) or managed memory (cudaMallocManaged)
};

struct MemoryLocation {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the owning device ordinal for kCuda, else -1
};

// Where `pointer` lives, as CUDA reports it. Host for nullptr and when CUDA has no device.
MemoryLocation locate(const void* pointer);

// Throws InvalidArgument unless `pointer` is CUDA memory of device `device`. `what` names the
// argument in the message ("send", "recv", ...).
void checkDevicePointer(const void* pointer, int device, std::string_view what);

enum class DevicePath : uint8_t {
  kAuto = 0,    // CUDA IPC where every rank can use it, else staged
  kIpc = 1,     // CUDA IPC; the first collective throws InvalidArgument naming why not possible
  kStaged = 2,  // through pinned host memory over the host transports
};
std::string_view toString(DevicePath path);

// How blocks go between ranks on the CUDA IPC path (staged calls are not affected): those of
// all-to-all, gather, scatter, all-gather, reduce-scatter and their v-forms, and the chunks of
// all-reduce. (Broadcast and reduce always go along the ring.)
enum class BlockRoute : uint8_t {
  kAuto = 0,    // direct at 3 or more ranks where every rank can write into every other rank's
                // GPU memory (all-reduce, all-gather, reduce-scatter: only where every rank
                // shares one GPU), else along the ring (at 2 ranks its one link is the pair)
  kDirect = 1,  // each block written once, into slots its receiver keeps for its sender (each
                // rank allocates (ranks - 1) x 2 slots at its first such call); InvalidArgument
                // naming why where some rank cannot
  kRing = 2,    // along the IPC ring: all-to-all by distance (a block crosses d links to the
                // rank d after its origin), gather and scatter as chains, the ring all-reduce,
                // all-gather and reduce-scatter (no more memory than the ring's)
};
std::string_view toString(BlockRoute route);

struct DeviceOptions {
  // Which path carries the data (see the top of this file). All ranks must agree.
  DevicePath path = DevicePath::kAuto;
  // CUDA IPC: receive slots per rank and bytes per slot (the pipeline's slice). Each rank
  // allocates slots * slotBytes of device memory at its first collective. slots in [1, 4]
  // (with three or more ranks at least 2 are used: a relaying rank holds a slot while it writes
  // the next rank's).
  // slotBytes 0: 4 MiB, or 64 MiB where every rank shares one GPU (see stagedBelowBytes: there
  // each slot hand-off costs a time slice, ~150 us on an H200, so fewer, larger slices win:
  // 128 MiB all-reduce, 2 ranks, 24.6 GB/s busbw with 4 MiB slots, 217 GB/s with 64 MiB).
  int slots = 4;
  size_t slotBytes = 0;
  // CUDA IPC where every rank shares one GPU: a call on fewer bytes than this times (ranks - 1)
  // (bytes: the larger of its input and output) goes staged instead. Processes sharing a GPU
  // take turns on it, and each hand-off of the ring waits for the other process's turn (measured
  // on an H200: ~150 us each, 2(n-1) per all-reduce), while a small staged call is a few copies
  // (8-byte broadcast, 2 ranks: 285 us on the ring, 9 us staged). 0: never. All ranks must agree.
  size_t stagedBelowBytes = size_t{1} << 20;
  // Staged path: bytes per pipelined chunk (rounded down to whole elements, at least one). Two
  // chunks of pinned host memory are allocated on first use and kept. All ranks must agree.
  size_t chunkBytes = size_t{4} << 20;
  // CUDA IPC: all-to-all, gather, scatter and their v-forms. The direct slots take about the
  // ring's bytes: 2 per peer of slots x slotBytes / (2 x (ranks - 1)), but at least
  // min(slotBytes, 1 MiB) and at most slotBytes. All ranks must agree.
  BlockRoute blockRoute = BlockRoute::kAuto;
  // Deadline for each wait on a copy, a stream (synchronize) or, on the IPC path, a peer.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);

  // Defaults with RINGLET_CUDA_PATH, RINGLET_CUDA_SLOT_BYTES, RINGLET_CUDA_STAGED_BELOW and
  // RINGLET_CUDA_BLOCK_ROUTE applied.
  static DeviceOptions fromEnvironment();
};

class DeviceCommunicator {
 public:
  // Checks that `device` exists (InvalidArgument naming it and the device count otherwise, or
  // CudaError when CUDA itself failed) and makes the CUDA events the staged path uses. Local:
  // no communication. `host` must outlive this object.
  DeviceCommunicator(Communicator& host, int device,
                     DeviceOptions options = DeviceOptions::fromEnvironment());
  DeviceCommunicator(DeviceCommunicator&&) noexcept;
  DeviceCommunicator& operator=(DeviceCommunicator&&) noexcept;
  ~DeviceCommunicator();  // frees pinned memory and events; never throws

  int device() const;
  Communicator& host() const;
  // The path in use: kAuto until the first collective has chosen one, then kIpc or kStaged (a
  // world of one: kStaged from the start; its calls are copies on the stream).
  DevicePath path() const;
  // The path a call that moves `bytes` (the larger of its input and output) takes: kStaged or
  // kIpc (on the IPC path where every rank shares one GPU, small calls go staged:
  // DeviceOptions::stagedBelowBytes); kAuto before the first collective has chosen.
  DevicePath pathFor(size_t bytes) const;
  // How all-to-all, gather, scatter and their v-forms go on the IPC path: kDirect or kRing once
  // decided (DeviceOptions::blockRoute; kAuto decides at the first such IPC call, or at once for
  // kRing and for two ranks, where the ring's one link is the pair), kAuto before.
  BlockRoute blockRoute() const;
  // The same for all-reduce, all-gather, reduce-scatter and the v-forms of the last two:
  // blockRoute() where every rank shares one GPU or kDirect is asked for; else kRing once decided.
  BlockRoute chunkRoute() const;

  // All-reduce of `count` elements on device memory; `send` may equal `recv` (in place).
  // Overlapping but unequal buffers are an error. Ordered on `stream`; see the top of this file
  // for what the call waits for.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 void* stream);
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op, void* stream) {
    allreduce(buffer, buffer, count, type, op, stream);
  }

  // Broadcast of root's `count` elements into `buffer` on every rank.
  void broadcast(void* buffer, size_t count, DataType type, int root, void* stream);

  // Reduce: the root ends with op(send of every rank) in recv (`count` elements). Other ranks
  // only read send; their recv is not touched, not checked, and may be null. In place on the
  // root: send == recv. IPC: a chain along the ring ending at the root; staged: the host
  // communicator's reduce on each chunk.
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
              void* stream);

  // All-gather: every rank ends with every rank's `sendCount` elements in recv, rank r's at
  // element r * sendCount (recv holds size() * sendCount). In place: send == recv + rank() *
  // sendCount elements; otherwise send and recv must not overlap.
  void allgather(const void* send, void* recv, size_t sendCount, DataType type, void* stream);

  // Reduce-scatter: send holds size() * recvCount elements; rank r ends with block r (elements
  // r * recvCount ..) reduced over all ranks, in recv. send is never written. In place: recv ==
  // send + rank() * recvCount elements; otherwise send and recv must not overlap.
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, ReduceOp op,
                     void* stream);

  // Gather, scatter and all-to-all: the host communicator's calls (the same layouts, in-place
  // forms and rules) on device memory. On the IPC path (as pathFor says) as blockRoute says:
  // direct (each block written into its receiver's slots) or along the ring (gather and scatter
  // as chains, all-to-all by distance); an all-to-all in place sends from a copy in
  // stream-ordered memory. Gather: the root's recv ends with size()
  // blocks of `count`, block q from rank q (other ranks' recv is not touched and may be null).
  // Scatter: rank r's recv ends with the root's block r (send is read on the root only and may be
  // null elsewhere). All-to-all: send and recv hold size() blocks of `count`; send == recv is
  // allowed.
  void gather(const void* send, void* recv, size_t count, DataType type, int root, void* stream);
  void scatter(const void* send, void* recv, size_t count, DataType type, int root, void* stream);
  void allToAll(const void* send, void* recv, size_t count, DataType type, void* stream);

  // The v-forms (uneven blocks) on device memory: the host communicator's allgatherv,
  // reduceScatterv, gatherv, scatterv and allToAllv (the same layouts, displacements, in-place
  // forms and rules; see ringlet/communicator.h), ordered on `stream`. Before anything moves the
  // ranks agree on the counts in one small host call (all-to-all-v: two, exchanging each pair's
  // counts), so ranks that disagree all get MismatchError, whatever the sizes. Then, as pathFor
  // says for their total (all-to-all-v: N blocks of the largest block anywhere, M elements):
  //  - IPC: over blocks of their own size (an empty block costs no message): gather-v,
  //    scatter-v and all-to-all-v as blockRoute says, all-gather-v and reduce-scatter-v as
  //    chunkRoute says: direct (each block into its receiver's slots), or along the ring (the
  //    ring for all-gather-v and reduce-scatter-v, chains for gather-v and scatter-v,
  //    all-to-all-v by distance, which first gathers the whole matrix of counts in a host call:
  //    every rank relays other pairs' blocks); all-to-all-v in place sends from a copy.
  //  - staged: chunk i is elements [i*c, (i+1)*c) of every block (c = chunkBytes / element size /
  //    ranks), packed in the pinned slot, one host v-form call per chunk.
  void allgatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
                  std::span<const size_t> displs, DataType type, void* stream);
  void reduceScatterv(const void* send, void* recv, std::span<const size_t> recvCounts,
                      DataType type, ReduceOp op, void* stream);
  void gatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
               std::span<const size_t> displs, DataType type, int root, void* stream);
  void scatterv(const void* send, std::span<const size_t> sendCounts,
                std::span<const size_t> displs, void* recv, DataType type, int root, void* stream);
  void allToAllv(const void* send, std::span<const size_t> sendCounts,
                 std::span<const size_t> sendDispls, void* recv, std::span<const size_t> recvCounts,
                 std::span<const size_t> recvDispls, DataType type, void* stream);

  // Waits until `stream` has finished its work, for at most options.timeout (TimeoutError
  // naming the rank and device then). Local: no communication.
  void synchronize(void* stream);

 private:
  struct State;
  void choosePath();
  std::unique_ptr<State> state_;
};

}  // namespace ringlet::cuda
