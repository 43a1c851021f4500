#pragma once
// What one collective call is, as exchanged between neighbours before any data moves, so that
// ranks that disagree fail with an error naming both calls instead of hanging or corrupting.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "collectives/chunking.h"
#include "ringlet/types.h"

namespace ringlet::detail {

// std::memcpy in a function of its own: a memcpy the compiler knows to be short (say at most 256
// bytes) may be inlined as `rep movsq`, which starts slowly.
void copyOutOfLine(void* dst, const void* src, size_t n);

// n bytes, sizeof(Word) <= n <= 2 sizeof(Word), as two overlapping words (one when equal).
template <typename Word>
inline void copyHeadTail(std::byte* d, const std::byte* s, size_t n) {
  Word head = 0;
  std::memcpy(&head, s, sizeof(Word));
  if (n == sizeof(Word)) {
    std::memcpy(d, &head, sizeof(Word));
    return;
  }
  Word tail = 0;
  std::memcpy(&tail, s + n - sizeof(Word), sizeof(Word));
  std::memcpy(d, &head, sizeof(Word));
  std::memcpy(d + n - sizeof(Word), &tail, sizeof(Word));
}

// memcpy for the few bytes a call header carries: 4-16 bytes as one or two words, inline (a call
// into the C library's memcpy costs a small call more than the copy).
inline void copySmall(void* dst, const void* src, size_t n) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (n >= 8 && n <= 16) {
    copyHeadTail<uint64_t>(d, s, n);
  } else if (n >= 4 && n < 8) {
    copyHeadTail<uint32_t>(d, s, n);
  } else if (n > 0) {
    copyOutOfLine(d, s, n);
  }
}

enum class OpKind : uint8_t {
  kAllreduce = 1,
  kBroadcast = 2,
  kBarrier = 3,
  kSend = 4,
  kRecv = 5,
  kDeviceSetup = 6,  // the CUDA device path's one-time setup (include/ringlet/cuda.h)
  kReduce = 7,
  kAllgather = 8,      // count: elements each rank contributes
  kReduceScatter = 9,  // count: elements each rank receives
  kGather = 10,        // count: elements each rank contributes
  kScatter = 11,       // count: elements each rank receives
  kAllToAll = 12,      // count: elements each rank sends to each rank
  // The v-forms: count is the elements in all, countsHash the counts vector that every rank must
  // pass alike, ranks its length.
  kAllgatherv = 13,
  kReduceScatterv = 14,
  // count: the elements this rank sends in all; not compared (each pair checks its own counts).
  kAllToAllv = 15,
  kCalibrate = 20,  // the cost model's measurement: Communicator::create, recalibrate()
  kSplit = 16,      // split (tag 0; root: this rank's color, count: its key) or dup (tag 1)
  // Communicator::sendrecv: never on the wire (its messages carry kSend headers). root: the rank
  // it sends to, source: the rank it receives from.
  kSendRecv = 21,
  // Trace mode's clock exchange with rank 0 at the end of create() (src/core/clock_offset.cc).
  kClockOffset = 22,
  // The rooted v-forms: as kAllgatherv (count in all, countsHash, ranks) with the root.
  kGatherv = 23,
  kScatterv = 24,
  // Communicator::probe / tryProbe: never on the wire. root: the peer (kAnySource: any rank, and
  // for tryProbe always, the peer then in source).
  kProbe = 25,
};

// A rank's part in a rooted call whose data rides in the call headers (kHeaderInline): on two
// ranks one sends and the other receives; on more the headers pass the data along the ring, from
// the rank that starts the chain (broadcast, scatter: the root; reduce, gather: the rank after
// it) to the rank before that one, each rank between relaying what it received.
enum class PairRole : uint8_t { kBoth, kSendsOnly, kReceivesOnly, kRelays };

// This rank's part in the chain of headers that rank `first` starts.
inline PairRole chainRole(int rank, int size, int first) {
  if (rank == first) return PairRole::kSendsOnly;
  return collectives::wrap(rank + 1, size) == first ? PairRole::kReceivesOnly : PairRole::kRelays;
}

// OpHeader::tag of a kSplit header made by dup() (split() sends 0).
inline constexpr int32_t kSplitIsDup = 1;

// Collectives take a sequence number shared by all ranks; send/recv count per pair of ranks.
inline bool isCollective(OpKind kind) {
  return kind != OpKind::kSend && kind != OpKind::kRecv && kind != OpKind::kSendRecv &&
         kind != OpKind::kProbe;
}

struct OpHeader {
  OpKind kind = OpKind::kBarrier;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = -1;  // broadcast, reduce: the root; send/recv: the peer
  int32_t tag = 0;    // send/recv; split: kSplitIsDup for dup()
  uint64_t count = 0;
  uint64_t seq = 0;
  // Where the buffers are: 0 host memory, 1 CUDA device memory (DeviceCommunicator).
  uint8_t memory = 0;
  // The v-forms: a fingerprint of the counts (countsHash) and how many there are (ranks).
  uint64_t countsHash = 0;
  int32_t ranks = 0;
  // The algorithm chosen (collectives::Algorithm; 0 where a call has no choice). Ranks that
  // force different algorithms disagree about the call.
  uint8_t algorithm = 0;
  // Not sent: sendrecv's second peer (the rank it receives from) and its receive count.
  int32_t source = -1;
  uint64_t recvCount = 0;
  // Not sent: the body checks the header itself after its first send (see checkHeader).
  bool earlyData = false;
  // Not sent: the body exchanges headers with its own partners instead of the ring round
  // (tiny all-reduce: every recursive-doubling message is a header carrying the data).
  bool selfChecked = false;
  // Not sent: a two-rank call in which this rank only sends (a header-inline broadcast or
  // scatter root, reduce or gather non-root), or a call that moves no data (emptyCall). It returns
  // once its header and data are sent; the peer's header is read at a later call of this rank
  // (CommunicatorImpl::execute).
  bool sendsOnly = false;
  // Not sent: the other side of such a call (a broadcast or scatter non-root, reduce or gather
  // root). When its peer's header and data are already there and match, it takes them and sends
  // no header of its own (but every few calls, so that the sender's record of unread calls stays
  // short); the sender learns that it was checked from the next header it reads, whose sequence
  // number is higher (CommunicatorImpl::takeWaitingHeader).
  bool receivesOnly = false;
  // Not sent: a rank inside a chain of headers (a kHeaderInline rooted call on more than two
  // ranks, neither the rank that starts it nor the one before that, PairRole::kRelays). It reads
  // the previous rank's header first, takes the data that came with it, and then sends its own
  // header with what it passes on to the next rank.
  bool relays = false;
  // Sent after the fields: a call whose data fits rides along with its header (kInlineBytes),
  // so a tiny two-rank all-reduce is one message each way. Not compared by sameCall().
  const std::byte* inlineData = nullptr;
  size_t inlineBytes = 0;
  // Not sent: the inline bytes the previous rank's header carries in this call, where they differ
  // from this rank's (a gather's chain grows by a block at each rank); kSameAsSent otherwise.
  static constexpr size_t kSameAsSent = SIZE_MAX;
  size_t inlineInBytes = kSameAsSent;
  size_t inlineFromPrevBytes() const {
    return inlineInBytes == kSameAsSent ? inlineBytes : inlineInBytes;
  }

  // On the wire a header is its fields followed by its inline data: kFieldBytes to kWireBytes.
  // The core's header round receives one of any length up to kWireBytes (Link::recvAny), so
  // ranks that disagree about a call get a MismatchError rather than a length error, and a
  // call without data sends one cache line rather than five.
  static constexpr size_t kFieldBytes = 48;
  static constexpr size_t kInlineBytes = 256;
  static constexpr size_t kWireBytes = kFieldBytes + kInlineBytes;
  // kFieldBytes + inlineBytes.
  size_t wireBytes() const { return kFieldBytes + std::min(inlineBytes, kInlineBytes); }
  // Always kWireBytes long (the inline data zero-padded): for messages of a fixed size.
  std::array<std::byte, kWireBytes> encode() const;
  // Writes wireBytes() bytes at `out`.
  void encodeTo(std::byte* out) const;
  // Returns false if the bytes are not a header (wrong magic).
  static bool decode(const std::byte* data, OpHeader& out);

  // "allreduce(count=1000, float32, sum)", "broadcast(count=7, int8, root=2)", "barrier()",
  // "allgatherv(count=1000 in all over 4 ranks, float32, counts #1f2e3d4c)"
  std::string describeCall() const;
  // A literal (NUL-terminated: data() may go where a C string is wanted); its length is known,
  // so a wait context built from it per call costs no strlen.
  std::string_view name() const;
  bool sameCall(const OpHeader& other) const;
};

// An unrooted collective call that moves no data: every count zero (the v-forms' count is their
// sum, the same on every rank), in host memory. Such a call runs as a sender-only call on every
// rank (CommunicatorImpl::execute, emptyCall): its header goes to the next rank and it returns,
// the previous rank's header read at a later call (Open MPI and NCCL return at once from a
// zero-count call, and check nothing). Before, these took their round of headers (and the
// all-to-all's and all-gather's exchanges of nothing): 3-4 ranks on 2 cores, 0.43-1.03 us a call
// against 1.2-7.1; 2 ranks 0.16-0.44 against 0.26-0.45 (bench/results/zero-count-calls-*). Not
// the barrier, which is its synchronisation; not all-to-all-v, whose count is what this rank
// sends (it may still receive); not the rooted calls, whose root returns at once already and
// whose other ranks skip their headers on two ranks (0.10 us a call there, 0.12-0.17 as
// sender-only calls).
inline bool movesNoData(const OpHeader& header) {
  if (header.count != 0 || header.memory != 0) return false;
  switch (header.kind) {
    case OpKind::kAllreduce:
    case OpKind::kAllgather:
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
    case OpKind::kAllgatherv:
    case OpKind::kReduceScatterv:
      return true;
    default:
      return false;
  }
}

// The header such a call sends (movesNoData): the caller's call with no algorithm (none runs,
// so ranks that force different ones still agree) and nothing inline, marked sender-only.
inline OpHeader emptyCall(const OpHeader& header) {
  OpHeader call = header;
  call.algorithm = 0;
  call.earlyData = false;
  call.selfChecked = false;
  call.sendsOnly = true;
  call.receivesOnly = false;
  call.relays = false;
  call.inlineData = nullptr;
  call.inlineBytes = 0;
  call.inlineInBytes = OpHeader::kSameAsSent;
  return call;
}

// The fingerprint of a v-form's counts (OpHeader::countsHash): equal vectors give equal values,
// and vectors that differ by mistake differ but for about a 2^-64 chance (a mixing hash, not a
// cryptographic one: it catches ranks that disagree, not a peer that lies).
uint64_t hashCounts(std::span<const size_t> counts);

// The error for two ranks that issued different calls: names both calls and both ranks.
// `where` is the wait description ("allreduce #3 on rank 1").
std::string describeMismatch(const std::string& where, int rank, const OpHeader& mine, int peer,
                             const OpHeader& theirs);

}  // namespace ringlet::detail
