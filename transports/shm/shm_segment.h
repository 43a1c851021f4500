#pragma once
// One shared-memory segment per pair of ranks on a host, holding both directions.
//
// The lower rank creates the file (O_EXCL | O_NOFOLLOW, mode 0600) in the shm directory, reserves
// its pages with fallocate (so a full tmpfs fails here with ENOSPC instead of SIGBUS in the data
// path), maps it and initialises the header. The higher rank checks the name it read from the
// store (our prefix, no slashes), opens it with O_NOFOLLOW, checks with fstat that it is a
// regular file of this user with mode 0600 and a sane size, maps it and acknowledges; the creator
// then unlinks its own file, so nothing stays behind once both have mapped it. A name taken from
// the store is never unlinked.
//
// Layout (offsets rounded to 64 bytes; slots start on a 4 KiB page):
//
//   SegmentHeader      magic, version, geometry, ranks of the two sides
//   Endpoint[2]        per side: open/closed/aborted, abort origin and reason   (side 0: creator)
//   Fifo[2]            per direction: tail, futex words, 64 message cells (fifo 0: 0 -> 1)
//   slots of fifo 0    slotCount x slotBytes
//   slots of fifo 1    slotCount x slotBytes
//
// Each Fifo is single-producer single-consumer: the producer announces message i in cell
// i % kCells (with its bytes when they fit the cell, else they are in the next slot, slots taken
// in turn), the consumer counts messages released in tail. Each sits on cache lines of its own.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/net/socket.h"

namespace ringlet::transport::shm {

inline constexpr uint64_t kSegmentMagic = 0x52494e474c534d31ull;  // "RINGLSM1"
inline constexpr uint32_t kSegmentVersion = 8;
inline constexpr size_t kMaxSlots = 64;
// An abort's reason: a call-mismatch description names both calls and runs to ~450 bytes; at 240
// its end was cut (segment version 4; TCP's frames carry up to 4096).
inline constexpr size_t kMaxReasonBytes = 1008;
inline constexpr size_t kCacheLine = 64;
// Every segment name starts with this; nothing else is ever opened or unlinked.
inline constexpr std::string_view kSegmentPrefix = "ringlet-";
// Largest segment an opener maps (64 slots of 1 GiB per direction, and the control pages).
inline constexpr size_t kMaxSegmentBytes = size_t{130} << 30;

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

enum class EndpointState : uint32_t { kOpen = 0, kClosed = 1, kAborted = 2 };

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t slotCount;
  uint64_t slotBytes;
  uint64_t totalBytes;
  int32_t ranks[2];  // ranks[side]; side 0 created the segment
};

// Written only by its own side. `state` is stored last (release) after origin and reason.
struct alignas(kCacheLine) Endpoint {
  std::atomic<uint32_t> state;  // EndpointState
  int32_t abortOrigin;
  uint32_t reasonBytes;
  // 1 when this side's process takes part in membarrier fences (shm_wait.h,
  // Segment::offerMembarrierFences); set before the segment's name or acknowledgement reaches
  // the peer.
  uint32_t membarrierFences;
  char reason[kMaxReasonBytes];
  // Direct writes (segment version 7): the address of a word in this side's private memory and
  // the random token it holds. A writer reads the word at that address in the process it takes
  // for this side; only if it holds the token does it write into that process (ShmLink).
  std::atomic<uint64_t> probeAddress;
  std::atomic<uint64_t> probeToken;
  // Lent messages (segment version 8): 1 once this side found the peer's probe token in the
  // process it takes for the peer, so it can read what the peer lends (Cell::kLent).
  std::atomic<uint32_t> readsPeer;
};

// A message's cell: its announcement and, when it fits, its bytes. `word` is stored last
// (release): (message index + 1) mod 2^32 in its top 32 bits, so a reader polling cell i % kCells
// for message i tells a new message from the one kCells before it; kInSlot when the bytes are in
// the next slot (messages longer than kCellPayloadBytes, or a slot claimed by sendBuffer());
// kPointToPoint for a point-to-point message (transport::Channel; segment version 6); kDirect
// when the producer wrote the bytes straight into the consumer's memory (Post); kLent when the
// bytes are in the producer's memory, at the address in the payload's first 8 bytes, for the
// consumer to read itself (ShmLink::lend); the length in the low 28 bits.
struct alignas(kCacheLine) Cell {
  static constexpr uint64_t kInSlot = uint64_t{1} << 31;
  static constexpr uint64_t kPointToPoint = uint64_t{1} << 30;
  // The bytes are already where the reader's Post asked for them (segment version 7).
  static constexpr uint64_t kDirect = uint64_t{1} << 29;
  // The bytes stay in the writer's memory until the reader released the message (version 8).
  static constexpr uint64_t kLent = uint64_t{1} << 28;
  static constexpr uint64_t kLengthMask = kLent - 1;
  // The longest message a word can announce (slots may be larger: ShmLink::maxMessageBytes).
  static constexpr size_t kMaxLength = kLent - kCacheLine;
  std::atomic<uint64_t> word;
  std::byte payload[5 * kCacheLine - sizeof(uint64_t)];
};
inline constexpr size_t kCells = 64;  // a power of two: cell of message i is i & (kCells - 1)
inline constexpr size_t kCellPayloadBytes = sizeof(Cell::payload);
// A reader holds at most slotCount messages unreleased; they must all fit the cells.
static_assert(kMaxSlots <= kCells);

// The consumer's offer of where the next messages of a channel go (ShmLink::expect): pieces of
// `step` bytes (the last shorter) of `bytes` at `address` in the consumer's memory, the first
// being the channel's message number `firstSeq`. The producer takes it for one message at a time
// (state kPosted -> kWriting, back to kPosted once written) and writes that piece there itself
// (process_vm_writev), one copy instead of two; the consumer withdraws it (kPosted -> kNone) when
// its receive ends. `state` also counts posts in its upper bits, so a producer never takes a
// post that was withdrawn and made again in between. Written by the consumer, but for the
// producer's take and give-back.
struct alignas(kCacheLine) Post {
  static constexpr uint64_t kNone = 0, kPosted = 1, kWriting = 2, kModeMask = 3;
  std::atomic<uint64_t> state;
  std::atomic<uint64_t> address;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> step;
  std::atomic<uint64_t> firstSeq;
  std::atomic<uint32_t> channel;
};

struct Fifo {
  // Consumer: messages released. The producer reads it only when it runs out of cells or slots.
  alignas(kCacheLine) std::atomic<uint64_t> tail;
  // The consumer sleeps on dataWord when it finds no message; the producer bumps and wakes it
  // only when consumerSleeping is set. Likewise the producer sleeps on spaceWord for a free cell
  // or slot. Before waking a sleeper the waker stamps when it published (Clock nanoseconds), so
  // the sleeper's wait policy can tell how long the data took apart from how long its wake-up
  // took.
  alignas(kCacheLine) std::atomic<uint32_t> dataWord;
  std::atomic<uint32_t> consumerSleeping;
  std::atomic<int64_t> dataPublished;
  alignas(kCacheLine) std::atomic<uint32_t> spaceWord;
  std::atomic<uint32_t> producerSleeping;
  std::atomic<int64_t> spacePublished;
  // Message i is announced in cells[i % kCells] (segment version 5: a small message costs its
  // reader one cache line, announcement and bytes together, and runs up to kCells ahead of the
  // reader; with slots only, 8).
  Cell cells[kCells];
  Post post;
};

struct SegmentGeometry {
  size_t slotCount = 0;
  size_t slotBytes = 0;
  size_t slotsOffset() const;  // where fifo 0's slots start
  size_t totalBytes() const;
};

// An owned mapping of one segment file. Move-only; unmaps on destruction and, on the side that
// created the file, unlinks it if the peer never did.
class Segment {
 public:
  // Creates, reserves, maps and initialises `dir/name`. Returns an empty Segment and fills
  // `noRoom` (a sentence naming the size wanted and the space free) when the directory lacks
  // space; throws IoError for any other failure.
  static Segment create(const std::string& dir, const std::string& name, SegmentGeometry geometry,
                        int creatorRank, int openerRank, std::string* noRoom);
  // Checks `name` (checkSegmentName), opens `dir/name` without following a symlink, checks with
  // fstat that it is a regular file of this user with mode 0600, maps it and checks its header
  // against the expected ranks. Never unlinks it (the creator does, unlinkFile()). Throws IoError
  // naming what did not match.
  static Segment open(const std::string& dir, const std::string& name, int creatorRank,
                      int openerRank);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  bool valid() const { return base_ != nullptr; }
  // The open segment file (kept open for the liveness locks), or -1.
  int fd() const { return fd_.get(); }
  // Takes this side's liveness lock: an open-file-description write lock on byte `side` of the
  // file, which the kernel drops when this process's last descriptor of the file closes (exit,
  // crash, SIGKILL), in whatever PID namespace. The peer reads it with livenessLockHeld().
  // Returns false where the kernel has no such locks (the pid watch is then all there is).
  bool holdLivenessLock(int side);
  // Says in `side`'s Endpoint that this process takes part in membarrier fences (shm_wait.h),
  // if it could join them. Call before the peer learns of the segment (the creator: before its
  // name is published; the opener: before it acknowledges); the link uses them when both sides
  // did.
  void offerMembarrierFences(int side);
  // The creator calls this once the peer confirmed it mapped the segment: removes the file it
  // created (its own path, never one read from the store).
  void unlinkFile();
  const std::string& path() const { return path_; }

  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  Endpoint* endpoint(int side) const;
  Fifo* fifo(int index) const;
  std::byte* slots(int fifoIndex) const;
  SegmentGeometry geometry() const { return geometry_; }

 private:
  void reset();

  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  SegmentGeometry geometry_;
  std::string path_;  // non-empty while this side must unlink the file
  net::Fd fd_;
};

// Whether some other open file description holds `side`'s liveness lock on the segment file open
// as `fd`. True (in doubt: alive) when the kernel cannot say.
bool livenessLockHeld(int fd, int side);

// "ringlet-<job>-<lo>-<hi>-<16 random hex>", with the job id reduced to [A-Za-z0-9_.-].
std::string segmentName(const std::string& jobId, int lowRank, int highRank);
// Throws IoError unless `name` is kSegmentPrefix followed by [A-Za-z0-9_.-] only (no slash, so
// no other directory), at most 255 bytes.
void checkSegmentName(std::string_view name);

}  // namespace ringlet::transport::shm
