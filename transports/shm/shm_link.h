#pragma once
// A Link over one shared-memory segment (see shm_segment.h for the layout).
//
// Zero-copy in both directions: sendBuffer() returns the next free cell (a message of up to
// kCellPayloadBytes) or slot of the outgoing FIFO, so the caller writes (reduces) straight into
// memory the peer reads; recv() returns the message in its cell or slot, so the caller reduces
// straight out of it. send() with caller memory copies in first; lend() leaves it there for
// the receiver to read (process_vm_readv) until flush(). Up to slotCount received messages may
// be held (recv() several times, release() frees the oldest).
//
// Not thread-safe: one thread drives a link at a time (the communicator's worker).
//
// Failure: every wait checks the peer's endpoint flags (closed, aborted with origin and reason)
// and, every kLivenessInterval, whether the peer process still runs, so a dead peer
// turns into a PeerError naming it within about that interval.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/progress.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_wait.h"
#include "transports/shm/slot_writer.h"
#include "transports/transport.h"

namespace ringlet::transport::shm {

class ShmLink final : public Link {
 public:
  // `side` 0 created the segment. `watch` follows the peer process. `direct`: messages of at
  // least kDirectWriteMinBytes may be written straight into the receiver's memory where it
  // expect()s them (process_vm_writev, or a copy within one process), once a probe showed that the
  // process this side would write into is the peer. `allToAllOnly`: this side offers no direct
  // writes and lends only to the pairwise all-to-all (Link::lendsForAllToAllOnly).
  // `lendBlockBytes`: Link::lendBlockBytes.
  ShmLink(int rank, int peer, Segment segment, int side, PeerWatch watch, Backoff backoff,
          bool direct = true, bool allToAllOnly = false, size_t lendBlockBytes = SIZE_MAX);
  // The largest receive offered to direct writes: past it the sender's one copy (straight into
  // memory the receiver's caches do not hold) took longer than the two through the slots, which
  // the two ranks make side by side.
  static constexpr size_t kDirectMaxBytes = size_t{1} << 20;
  ~ShmLink() override;

  std::string_view transportName() const override { return "shm"; }
  std::string describe() const override;
  size_t maxMessageBytes() const override { return maxBytes_; }
  bool sharesMemory() const override { return true; }

  std::byte* sendBuffer(size_t bytes, std::byte* scratch, const WaitContext& wait) override;
  void send(const std::byte* data, size_t bytes, const WaitContext& wait) override;
  void fillSendBuffer(std::byte* buffer, const std::byte* src, size_t bytes) override {
    writer_.write(buffer, src, bytes);
  }
  bool streamsIntoSendBuffer() const override { return writer_.mode() == SlotWriter::kStreaming; }
  void lend(const std::byte* data, size_t bytes, const WaitContext& wait) override;
  bool lendsNow(size_t bytes) const override;
  size_t queueMessages() const override { return kCells; }
  void flush(const WaitContext& wait) override;

  const std::byte* recv(size_t bytes, const WaitContext& wait) override;
  void release() override;
  void recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) override;
  void expect(std::byte* dst, size_t bytes, size_t step) override;
  void unexpect() noexcept override;
  size_t directBytes() const override { return directState_ >= 0 ? kDirectMaxBytes : 0; }
  bool lendsForAllToAllOnly() const override { return allToAllOnly_; }
  size_t lendBlockBytes() const override { return lendBlockBytes_; }

  bool pump() override { return false; }  // nothing is ever queued: send() publishes at once
  bool messageReady() noexcept override;
  bool canPeek() const override { return true; }
  const std::byte* peekMessage(size_t* bytes) noexcept override;
  void skipPeeked(const WaitContext& wait) override;
  bool spinForMessage() noexcept override;
  void checkPeer(const WaitContext& wait) override;
  void checkPeerAlive(const WaitContext& wait) override;
  const std::byte* recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) override;
  Wake armWake(std::atomic<uint32_t>** word, uint32_t* seen) noexcept override;
  void disarmWake() noexcept override;
  void abort(int origin, std::string_view reason) override;

 private:
  enum class WaitFor { kMessage, kSlot, kRead };
  size_t slotOf(uint64_t message) const {
    return slotMask_ != 0 || slotCount_ == 1 ? message & slotMask_ : message % slotCount_;
  }
  // "a message of 64 bytes from rank 3 over shm"
  std::string describeWait(WaitFor what, size_t bytes) const;
  // Spin, then yield, then sleep on `word` (announcing it in `sleeping`; the waker stamps
  // `published`) until ready() holds.
  template <typename Ready>
  void waitUntil(const Ready& ready, std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleeping,
                 std::atomic<int64_t>* published, WaitFor what, size_t bytes,
                 const WaitContext& wait);
  // Throws PeerError if the peer aborted or closed its end.
  void checkPeerFlags(WaitFor what, size_t bytes, const WaitContext& wait) const;
  [[noreturn]] void throwPeerGone(const std::string& how, WaitFor what, size_t bytes,
                                  const WaitContext& wait) const;
  void checkUsable(const char* call) const;
  // recv()'s and recvAny()'s work: waits for the next message and returns its slot, its length
  // in `length`; IoError unless it is `bytes` long (`exact`) or at most `bytes`.
  const std::byte* takeMessage(size_t bytes, bool exact, uint64_t* length, const WaitContext& wait);
  void checkSize(size_t bytes, const char* call) const;
  // The memory message outHead_'s `bytes` go to: its cell's payload when they fit, else the next
  // slot (waiting for a free cell, and slot, first).
  std::byte* claimSlot(size_t bytes, const WaitContext& wait);
  // claimSlot()'s wait until `ready` (a free cell, or cell and slot) holds.
  template <typename Ready>
  void waitForSpace(const Ready& ready, size_t bytes, const WaitContext& wait,
                    WaitFor what = WaitFor::kSlot);
  // Whether message `index`'s announcement is in its cell (its word, in `word`).
  bool announced(uint64_t index, uint64_t* word) const {
    *word = in_->cells[index & (kCells - 1)].word.load(std::memory_order_acquire);
    return (*word >> 32) == static_cast<uint32_t>(index + 1);
  }
  // Where message `index` (announced as `word`) holds its bytes; `large` counts the messages
  // before it that went to slots.
  const std::byte* payloadOf(uint64_t index, uint64_t word, uint64_t large) const {
    return (word & Cell::kInSlot) != 0 ? inSlots_ + slotOf(large) * slotBytes_
                                       : in_->cells[index & (kCells - 1)].payload;
  }
  // Message inNext_ (announced as `word`), a point-to-point message a collective's receive
  // passed over and held (Link::setReceiveChannel): handed out and, once every message before
  // it is released, released.
  void skipMessage(uint64_t word);
  // Holds the point-to-point messages at the head that a receive passes over; true once the
  // next message, announced as `*word`, is one to show. `wait` null: a look that must not throw
  // (false where holding would).
  bool passOver(uint64_t* word, const WaitContext* wait) {
    if (!announced(inNext_, word)) return false;
    if ((*word & Cell::kPointToPoint) == 0 || !passesPointToPoint()) [[likely]] {
      return true;
    }
    return passOverHeld(word, wait);
  }
  // Whether the length announced in `word` fits where its bytes are (a cell or a slot): the
  // peer's word, checked before anything reads that many bytes.
  bool fits(uint64_t word) const {
    const uint64_t where = word & (Cell::kInSlot | Cell::kDirect | Cell::kLent);
    if (where == Cell::kDirect || where == Cell::kLent) {
      return (word & Cell::kLengthMask) <= maxBytes_;
    }
    if ((where & (Cell::kDirect | Cell::kLent)) != 0) return false;  // two places at once
    return (word & Cell::kLengthMask) <=
           ((word & Cell::kInSlot) != 0 ? slotBytes_ : kCellPayloadBytes);
  }
  [[noreturn]] void throwCorrupt(uint64_t word, const WaitContext& wait) const;
  // passOver() from a point-to-point message at the head on.
  bool passOverHeld(uint64_t* word, const WaitContext* wait);
  // The word's bit for the channel of what is sent now, and the channel a word announces.
  uint64_t channelBit() const {
    static_assert(static_cast<int>(Channel::kPointToPoint) == 1 &&
                  Cell::kPointToPoint == uint64_t{1} << 30);
    return uint64_t{static_cast<uint8_t>(sendChannel_)} << 30;
  }
  static Channel channelOf(uint64_t word) { return static_cast<Channel>((word >> 30) & 1); }
  // Bumps and wakes every futex word of the segment (close and abort).
  void wakeAll();
  // Direct writes, the sender's side: where in the peer's memory the peer asked for the next
  // message of this channel if it is `bytes` long (0: not asked for, or not this message).
  uint64_t directTarget(size_t bytes) const;
  // Writes `data` there and announces it; false (nothing sent) where the post went away or the
  // write failed (then direct writes stop on this link).
  bool sendDirect(const std::byte* data, size_t bytes, const WaitContext& wait);
  // Whether the process this side would write into holds the peer's probe token (once).
  bool peerProbed();
  // The receiver's side: where message `word` (a direct one, the channel's message `seq`)
  // put its bytes, or null where no expect() asked for it there.
  const std::byte* directPayload(uint64_t word, uint64_t seq) const;
  // Lent messages, the receiver's side: reads the `bytes` of message `index` (announced in its
  // cell with kLent) from the peer's memory into `dst`; IoError where they cannot be read,
  // PeerError where the peer aborted meanwhile (its memory may have changed).
  void readLent(uint64_t index, std::byte* dst, size_t bytes, const WaitContext& wait);
  // readLent() into memory of this link's (one buffer per message that may be held at once),
  // for a receive that hands out the message (recv(), recvAny(), a held point-to-point one).
  const std::byte* readLentCopy(uint64_t index, size_t bytes, const WaitContext& wait);
  // send()'s end for bytes already in the claimed cell: announces message outHead_.
  void publishCell(size_t bytes);
  // Publishes message outHead_'s announcement `word` in its cell and wakes the peer if it sleeps.
  void announce(uint64_t word);

  int rank_;
  Segment segment_;
  PeerWatch watch_;
  Waiter waiter_;
  size_t slotCount_;
  // slotCount_ - 1 when it is a power of two (the default 8): message n's slot is n & mask,
  // without a division (tens of cycles, several per message).
  size_t slotMask_;
  size_t slotBytes_;
  size_t maxBytes_;  // the longest message: slotBytes_, or less where a cell's word must tell it
  Endpoint* self_;
  Endpoint* other_;

  Fifo* out_;
  std::byte* outSlots_;
  uint64_t outHead_ = 0;      // messages this side published
  uint64_t outTailSeen_ = 0;  // last tail read from shared memory
  uint64_t outLarge_ = 0;     // of them, those whose bytes went to a slot
  // Per slot, the index of the last message published in it: the slot is free again once the
  // tail passed it.
  std::vector<uint64_t> slotMessage_;
  std::byte* claimed_ = nullptr;  // memory handed out by sendBuffer(), not yet sent
  bool claimedSlot_ = false;      // claimed_ is a slot, not the cell's payload
  SlotWriter writer_;             // how bytes are copied into the outgoing slots
  // Messages offered to a direct write; every SlotWriter::kProbeEvery-th goes through the slots.
  uint64_t directOffers_ = 0;

  Fifo* in_;
  std::byte* inSlots_;
  uint64_t inNext_ = 0;   // messages handed out by recv()
  uint64_t inTail_ = 0;   // messages released
  uint64_t inLarge_ = 0;  // of those handed out, those whose bytes were in a slot
  // Of those handed out and not released, the ones held by skipMessage (ascending): release()
  // passes them too.
  std::deque<uint64_t> skipped_;

  // Both sides joined membarrier fences: the writer's side of the sleep handshake needs no
  // full fence (shm_wait.h).
  bool membarrierFences_;
  // One past the last message announced when armWake() last looked.
  uint64_t wakeEnd_ = 0;

  bool aborted_ = false;
  std::string abortReason_;

  // Direct writes. Messages sent and received per channel (Post::firstSeq counts in these).
  uint64_t outChannelSeq_[2] = {0, 0};
  uint64_t inChannelSeq_[2] = {0, 0};
  int directState_;                  // 1: the peer's probe checked out; 0: not yet tried; -1: off
  std::unique_ptr<uint64_t> probe_;  // this side's probe word (private memory)
  // This side's current post (in_->post), while expectActive_.
  bool expectActive_ = false;
  std::byte* expectAddress_ = nullptr;
  uint64_t expectBytes_ = 0;
  uint64_t expectStep_ = 0;
  uint64_t expectFirst_ = 0;
  Channel expectChannel_ = Channel::kCollective;
  uint64_t postSeq_ = 0;

  // Lent messages: whether this side may lend (RINGLET_SHM_DIRECT, a known peer process); the
  // out-tail flush() waits for (one past the last message lent); whether this side tried to
  // read the peer's probe (and published readsPeer); the message takeMessage() handed out last
  // was lent; copies for recv().
  bool lends_;
  bool allToAllOnly_;
  size_t lendBlockBytes_;
  uint64_t lentUntil_ = 0;
  bool readProbed_ = false;
  bool readsPeer_ = false;
  bool takenLent_ = false;
  std::vector<std::vector<std::byte>> lentCopies_;
  // The buffers lent since the last flush, in a ThreadSanitizer build only (tsan_sync.h).
  std::vector<const std::byte*> lentKeys_;
};

}  // namespace ringlet::transport::shm
