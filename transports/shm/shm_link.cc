#include "transports/shm/shm_link.h"
#include "transports/shm/kernel_copy.h"

#include <fmt/format.h>

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "transports/shm/tsan_sync.h"

namespace ringlet::transport::shm {
namespace {

// The waiter's flag: kAwake while it spins (or does not wait), kYielding once it yields (the
// writer stamps when it published), kSleeping while it sleeps on the futex (stamp and wake).
constexpr uint32_t kAwake = 0, kSleeping = 1, kYielding = 2;

// Asks for the cache line at `p` in a state this core may write (x86 PREFETCHW: AMD since K8,
// Intel since Broadwell; older Intel cores take it as a no-op).
inline void prefetchForWrite(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// Publishing side of the sleep handshake: the store that makes the waiter's condition true has
// happened; stamp the time if the waiter yields or sleeps, and wake it if it sleeps. The fence
// pairs with the one in waitUntil(): either the waiter sees the new state or this side sees its
// flag. With membarrier fences the sleeper's membarrierFence() fences this thread too, so a
// compiler barrier is enough here.
void notify(std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleeping,
            std::atomic<int64_t>* published, bool membarrierFences) {
  if (membarrierFences) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  const uint32_t flag = sleeping->load(std::memory_order_relaxed);
  if (flag == kAwake) return;
  published->store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  if (flag == kSleeping) {
    word->fetch_add(1, std::memory_order_seq_cst);
    futexWake(word);
  }
}

}  // namespace

ShmLink::ShmLink(int rank, int peer, Segment segment, int side, PeerWatch watch, Backoff backoff,
                 bool direct, bool allToAllOnly, size_t lendBlockBytes)
    : Link(peer),
      rank_(rank),
      segment_(std::move(segment)),
      watch_(std::move(watch)),
      waiter_(backoff, /*stampsArrivals=*/true),
      slotCount_(segment_.geometry().slotCount),
      slotMask_((slotCount_ & (slotCount_ - 1)) == 0 ? slotCount_ - 1 : 0),
      slotBytes_(segment_.geometry().slotBytes),
      maxBytes_(std::min(slotBytes_, Cell::kMaxLength)),
      self_(segment_.endpoint(side)),
      other_(segment_.endpoint(1 - side)),
      out_(segment_.fifo(side)),
      outSlots_(segment_.slots(side)),
      slotMessage_(slotCount_, 0),
      in_(segment_.fifo(1 - side)),
      inSlots_(segment_.slots(1 - side)),
      membarrierFences_(self_->membarrierFences == 1 && other_->membarrierFences == 1),
      directState_(direct && (watch_.sameProcess() || watch_.pid() > 0) ? 0 : -1),
      lends_(directState_ == 0),
      allToAllOnly_(allToAllOnly),
      lendBlockBytes_(lendBlockBytes),
      lentCopies_(slotCount_) {
  // The probe: a random token in this process's private memory, and where it is. A writer that
  // finds it at that address in the process it takes for this side writes into that process.
  std::random_device random;
  const uint64_t token = (uint64_t{random()} << 32) ^ random() ^ 1;
  probe_ = std::make_unique<uint64_t>(token);
  self_->probeToken.store(token, std::memory_order_relaxed);
  self_->probeAddress.store(reinterpret_cast<uint64_t>(probe_.get()), std::memory_order_release);
}

ShmLink::~ShmLink() {
  if (!aborted_ && out_->tail.load(std::memory_order_acquire) < lentUntil_) {
    // A lent message the peer has not read: its memory may change from now on, so the peer
    // must not take what it finds there for the message.
    abort(rank_, "closed its link before the peer read a message lent to it");
  }
  if (!aborted_) {
    self_->state.store(static_cast<uint32_t>(EndpointState::kClosed), std::memory_order_release);
    wakeAll();
  }
}

std::string ShmLink::describe() const {
  return fmt::format(
      "shm rank {} <-> rank {} ({} slots x {} bytes per direction, {} cells of up to {} bytes)",
      rank_, peer(), slotCount_, slotBytes_, kCells, kCellPayloadBytes);
}

void ShmLink::wakeAll() {
  for (int index = 0; index < 2; ++index) {
    Fifo* fifo = segment_.fifo(index);
    fifo->dataWord.fetch_add(1, std::memory_order_seq_cst);
    futexWake(&fifo->dataWord);
    fifo->spaceWord.fetch_add(1, std::memory_order_seq_cst);
    futexWake(&fifo->spaceWord);
  }
}

void ShmLink::checkUsable(const char* call) const {
  if (aborted_) {
    throw AbortedError(
        fmt::format("{} on the shm link from rank {} to rank {}: the link was "
                    "aborted ({})",
                    call, rank_, peer(), abortReason_));
  }
}

void ShmLink::checkSize(size_t bytes, const char* call) const {
  if (bytes > maxBytes_) {
    throw InvalidArgument(fmt::format(
        "{}: message of {} bytes to rank {} exceeds the shm link's maxMessageBytes ({})", call,
        bytes, peer(), maxBytes_));
  }
}

std::string ShmLink::describeWait(WaitFor what, size_t bytes) const {
  if (what == WaitFor::kMessage) {
    return fmt::format("a message of {} bytes from rank {} over shm", bytes, peer());
  }
  if (what == WaitFor::kRead) {
    return fmt::format("rank {} to read the messages lent to it over shm", peer());
  }
  return fmt::format("a free slot for a message of {} bytes to rank {} over shm", bytes, peer());
}

void ShmLink::throwPeerGone(const std::string& how, WaitFor what, size_t bytes,
                            const WaitContext& wait) const {
  throw PeerError(peer(), fmt::format("rank {} {} while {} waited for {}", peer(), how,
                                      wait.describe(), describeWait(what, bytes)));
}

void ShmLink::checkPeerFlags(WaitFor what, size_t bytes, const WaitContext& wait) const {
  auto state = static_cast<EndpointState>(other_->state.load(std::memory_order_acquire));
  if (state == EndpointState::kOpen) return;
  if (state == EndpointState::kAborted) {
    size_t length = std::min<size_t>(other_->reasonBytes, kMaxReasonBytes);
    std::string reason(other_->reason, length);
    int origin = other_->abortOrigin;
    throw PeerError(origin, fmt::format("rank {} aborted: {}", origin, reason), true);
  }
  throwPeerGone("closed its link", what, bytes, wait);
}

void ShmLink::checkPeer(const WaitContext& wait) {
  // A peer that closed its end after sending what is still queued here has not failed: it
  // finished (a chain's last rank answers the rank that started the chain and closes its
  // communicator, which may happen before that rank looks). What it sent is read at the next
  // wait, which then finds it gone if more is wanted; TCP's and the local transport's checks
  // let queued messages come first too. An abort is reported at once.
  // One look at its state, and the queue looked at after it: a second look (checkPeerFlags
  // alone) could find it closed after a last message that the first look's kOpen let pass.
  const auto state = static_cast<EndpointState>(other_->state.load(std::memory_order_acquire));
  if (state == EndpointState::kOpen) return;
  if (state != EndpointState::kAborted && messageReady()) return;
  checkPeerFlags(WaitFor::kMessage, 0, wait);
}

void ShmLink::checkPeerAlive(const WaitContext& wait) {
  checkPeer(wait);
  // Its last messages may still be here: those come before its death.
  if (!watch_.alive() && !messageReady()) {
    throwPeerGone(fmt::format("({}) exited", watch_.describe()), WaitFor::kMessage, 0, wait);
  }
}

template <typename Ready>
void ShmLink::waitUntil(const Ready& ready, std::atomic<uint32_t>* word,
                        std::atomic<uint32_t>* sleeping, std::atomic<int64_t>* published,
                        WaitFor what, size_t bytes, const WaitContext& wait) {
  // The wait engine (transports/progress.h) spins, yields, then blocks on the futex; between
  // rounds the peer's flags, and every kLivenessInterval its process, are checked.
  // Past the spin phase the flag asks the writer for its stamp (kYielding), which the wait policy
  // reads once the data is there (Waiter::arrived: did the data sit while we yielded or slept?).
  auto nextLiveness = Clock::now() + kLivenessInterval;
  bool stamping = false;
  // The flag shares its cache line with what the writer reads on every send (notify): it is
  // written back only when this wait changed it, so a wait that ends in its spin phase leaves
  // the writer's copy of that line alone.
  bool flagged = false;
  struct ClearFlag {
    std::atomic<uint32_t>* flag;
    const bool* changed;
    ~ClearFlag() {
      if (*changed) flag->store(kAwake, std::memory_order_relaxed);
    }
  } clearFlag{sleeping, &flagged};
  auto readyStamped = [&] {
    if (!ready()) return false;
    const int64_t stamp = stamping ? published->load(std::memory_order_relaxed) : 0;
    if (stamp != 0) waiter_.arrived(Deadline(Clock::duration(stamp)));
    return true;
  };
  auto check = [&] {
    if (!stamping) {  // the first call comes right after the spin phase
      stamping = true;
      // The stamp is advice to the wait policy: a writer without a full fence (membarrier
      // fences) may publish without seeing this flag, and then no stamp (0) is no advice.
      published->store(0, std::memory_order_relaxed);
      flagged = true;
      sleeping->store(kYielding, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // A peer that closed published its last messages before it said so: one may have come
    // between the look that found nothing and this (a 4-rank barrier's last message, once in a
    // fresh-clone run: "rank 3 closed its link while barrier #475 on rank 1 waited"). So the
    // state is read once and `ready` looked at after it: reading it again in checkPeerFlags
    // after a kOpen here could find it closed with a last message already queued (a 3 x 2
    // hierarchical test, once in a fresh-clone run: "rank 4 closed its link while shm-test #0
    // on rank 0 waited for a message of 1000 bytes"). An abort is still reported first.
    const auto state = static_cast<EndpointState>(other_->state.load(std::memory_order_acquire));
    if (state == EndpointState::kClosed && ready()) return;
    if (state != EndpointState::kOpen) checkPeerFlags(what, bytes, wait);
    const auto now = Clock::now();
    if (now < nextLiveness) return;
    if (!watch_.alive()) {
      // Its last messages may still be here: deliver them before reporting the death.
      if (ready()) return;
      throwPeerGone(fmt::format("({}) exited", watch_.describe()), what, bytes, wait);
    }
    nextLiveness = now + kLivenessInterval;
  };
  auto block = [&](std::chrono::nanoseconds slice, bool) {
    flagged = true;
    sleeping->store(kSleeping, std::memory_order_relaxed);
    if (membarrierFences_) {
      membarrierFence();  // for this thread and the writer's (shm_wait.h)
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (!ready() && other_->state.load(std::memory_order_acquire) ==
                        static_cast<uint32_t>(EndpointState::kOpen)) {
      futexWait(word, seen, std::min<std::chrono::nanoseconds>(slice, nextLiveness - Clock::now()));
    }
    sleeping->store(kYielding, std::memory_order_relaxed);
  };
  waitFor(*this, wait, waiter_, /*slowWake=*/false, readyStamped, check, block,
          [&] { return describeWait(what, bytes); });
}

std::byte* ShmLink::claimSlot(size_t bytes, const WaitContext& wait) {
  if (claimed_ != nullptr) {
    if (claimedSlot_ || bytes <= kCellPayloadBytes) return claimed_;
    claimed_ = nullptr;  // a cell was handed out for a smaller message: a slot instead
  }
  auto cellFree = [&] { return outHead_ - outTailSeen_ < kCells; };
  if (!cellFree()) [[unlikely]] {
    waitForSpace(cellFree, bytes, wait);
  }
  if (bytes <= kCellPayloadBytes) {
    claimedSlot_ = false;
    claimed_ = out_->cells[outHead_ & (kCells - 1)].payload;
    return claimed_;
  }
  const size_t slot = slotOf(outLarge_);
  // The slot's last message (slotCount_ large messages ago) must have been released.
  auto slotFree = [&] { return outLarge_ < slotCount_ || outTailSeen_ > slotMessage_[slot]; };
  if (!slotFree()) waitForSpace(slotFree, bytes, wait);
  claimedSlot_ = true;
  claimed_ = outSlots_ + slot * slotBytes_;
  return claimed_;
}

template <typename Ready>
void ShmLink::waitForSpace(const Ready& free, size_t bytes, const WaitContext& wait, WaitFor what) {
  auto ready = [&] {
    outTailSeen_ = out_->tail.load(std::memory_order_acquire);
    return free();
  };
  if (!ready()) {
    waitUntil(ready, &out_->spaceWord, &out_->producerSleeping, &out_->spacePublished, what, bytes,
              wait);
  }
}

std::byte* ShmLink::sendBuffer(size_t bytes, std::byte* scratch, const WaitContext& wait) {
  if (aborted_ || bytes > maxBytes_) [[unlikely]] {
    checkUsable("sendBuffer");
    checkSize(bytes, "sendBuffer");
  }
  // The caller's memory, where the peer asked for this message: send() writes it from there.
  if (bytes >= kDirectWriteMinBytes && scratch != nullptr && claimed_ == nullptr &&
      directState_ >= 0 && directTarget(bytes) != 0) {
    return scratch;
  }
  return claimSlot(bytes, wait);
}

void ShmLink::publishCell(size_t bytes) {
  announce((uint64_t{static_cast<uint32_t>(outHead_ + 1)} << 32) | bytes | channelBit());
}

void ShmLink::announce(uint64_t word) {
  out_->cells[outHead_ & (kCells - 1)].word.store(word, std::memory_order_release);
  ++outHead_;
  ++outChannelSeq_[static_cast<int>(channelOf(word))];
  claimed_ = nullptr;
  // The next message's cell: last read by the peer kCells messages ago, so this core must take
  // the line back before its first store there. Asking now takes that round trip off the next
  // message's path: when both ranks send and then wait (a small all-reduce's header exchange),
  // each store otherwise waits for it while the peer already polls. N = 2 over shm, 8 bytes:
  // all-reduce 103-106 -> 75-78 ns, all-gather 92-100 -> 80-87, sendrecv 113-124 -> 108-110.
  prefetchForWrite(&out_->cells[outHead_ & (kCells - 1)]);
  notify(&out_->dataWord, &out_->consumerSleeping, &out_->dataPublished, membarrierFences_);
}

void ShmLink::send(const std::byte* data, size_t bytes, const WaitContext& wait) {
  if (data == claimed_ && data != nullptr && !claimedSlot_ && bytes <= kCellPayloadBytes &&
      !aborted_) [[likely]] {
    // The cell sendBuffer() handed out, written in place (a call header): publish it.
    publishCell(bytes);
    return;
  }
  if (aborted_ || bytes > maxBytes_ || (bytes > 0 && data == nullptr)) [[unlikely]] {
    checkUsable("send");
    checkSize(bytes, "send");
    throw InvalidArgument(
        fmt::format("send: data is null for a message of {} bytes to rank {}", bytes, peer()));
  }
  if (data == claimed_ && !claimedSlot_ && bytes > kCellPayloadBytes) [[unlikely]] {
    throw InvalidArgument(fmt::format(
        "send: a message of {} bytes to rank {} from the {} bytes sendBuffer() handed out", bytes,
        peer(), kCellPayloadBytes));
  }
  if (bytes >= kDirectWriteMinBytes && data != claimed_ && directState_ >= 0 &&
      sendDirect(data, bytes, wait)) {
    return;
  }
  std::byte* claimed = claimSlot(bytes, wait);  // a slot instead of a cell if the bytes need it
  const size_t room = claimedSlot_ ? slotBytes_ : kCellPayloadBytes;
  if (data != claimed && bytes > 0) {
    // Caller memory (or a region inside the claimed memory): copy it in now, so the caller may
    // reuse it as soon as send() returns.
    bool overlaps = data < claimed + room && claimed < data + bytes;
    if (overlaps) {
      std::memmove(claimed, data, bytes);
    } else if (claimedSlot_) {
      writer_.write(claimed, data, bytes);
    } else {
      kernels::copy(claimed, data, bytes);
    }
  }
  uint64_t word = (uint64_t{static_cast<uint32_t>(outHead_ + 1)} << 32) | bytes;
  word |= channelBit();
  if (claimedSlot_) {
    word |= Cell::kInSlot;
    slotMessage_[slotOf(outLarge_)] = outHead_;
    ++outLarge_;
  }
  announce(word);
}

bool ShmLink::lendsNow(size_t bytes) const {
  return bytes >= kLendMinBytes && bytes <= maxBytes_ && !aborted_ && claimed_ == nullptr &&
         lends_ && other_->readsPeer.load(std::memory_order_acquire) == 1;
}

void ShmLink::lend(const std::byte* data, size_t bytes, const WaitContext& wait) {
  if (data == nullptr || !lendsNow(bytes)) {
    send(data, bytes, wait);
    return;
  }
  auto cellFree = [&] { return outHead_ - outTailSeen_ < kCells; };
  if (!cellFree()) waitForSpace(cellFree, bytes, wait);
  const uint64_t address = reinterpret_cast<uint64_t>(data);
  std::memcpy(out_->cells[outHead_ & (kCells - 1)].payload, &address, sizeof(address));
  lentUntil_ = outHead_ + 1;
  if constexpr (tsan::kEnabled) {
    tsan::release(data);
    lentKeys_.push_back(data);
  }
  announce((uint64_t{static_cast<uint32_t>(outHead_ + 1)} << 32) | bytes | channelBit() |
           Cell::kLent);
}

void ShmLink::flush(const WaitContext& wait) {
  // send() copied caller memory into the segment before returning; only lent messages may
  // still be read from it, until the peer releases them.
  checkUsable("flush");
  auto read = [&] { return outTailSeen_ >= lentUntil_; };
  if (!read()) waitForSpace(read, 0, wait, WaitFor::kRead);
  if constexpr (tsan::kEnabled) {
    for (const std::byte* key : lentKeys_) tsan::acquire(key);
    lentKeys_.clear();
  }
}

const std::byte* ShmLink::recv(size_t bytes, const WaitContext& wait) {
  uint64_t length = 0;
  const std::byte* payload = takeMessage(bytes, /*exact=*/true, &length, wait);
  return takenLent_ ? readLentCopy(inNext_ - 1, length, wait) : payload;
}

const std::byte* ShmLink::recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) {
  uint64_t length = 0;
  const std::byte* slot = takeMessage(maxBytes, /*exact=*/false, &length, wait);
  *bytes = length;
  return takenLent_ ? readLentCopy(inNext_ - 1, length, wait) : slot;
}

const std::byte* ShmLink::readLentCopy(uint64_t index, size_t bytes, const WaitContext& wait) {
  std::vector<std::byte>& copy = lentCopies_[index % lentCopies_.size()];
  if (copy.size() < bytes) copy.resize(bytes);
  readLent(index, copy.data(), bytes, wait);
  return copy.data();
}

void ShmLink::readLent(uint64_t index, std::byte* dst, size_t bytes, const WaitContext& wait) {
  uint64_t address = 0;
  std::memcpy(&address, in_->cells[index & (kCells - 1)].payload, sizeof(address));
  if (watch_.sameProcess()) {
    // The lender's memory is this process's: read it only while the lender has not failed (a
    // failed call's buffer goes back to its caller, who may free it).
    checkPeerFlags(WaitFor::kMessage, bytes, wait);
    const auto* lent = reinterpret_cast<const std::byte*>(address);
    tsan::acquire(lent);
    kernels::copy(dst, lent, bytes);
    tsan::release(lent);  // read before the lender's flush() returns
  } else {
    iovec local{.iov_base = dst, .iov_len = bytes};
    iovec remote{.iov_base = reinterpret_cast<void*>(address), .iov_len = bytes};
    const ssize_t read = ::process_vm_readv(watch_.pid(), &local, 1, &remote, 1, 0);
    if (read != static_cast<ssize_t>(bytes)) {
      const int error = errno;
      checkPeerFlags(WaitFor::kMessage, bytes, wait);         // an abort explains it better
      if ((read < 0 && error == ESRCH) || !watch_.alive()) {  // the lender's process is gone
        throwPeerGone(fmt::format("({}) exited", watch_.describe()), WaitFor::kMessage, bytes,
                      wait);
      }
      throw IoError(fmt::format(
          "{}: could not read the {} bytes rank {} lent over shm at {:#x} in process {} ({})",
          wait.describe(), bytes, peer(), address, watch_.pid(),
          read < 0 ? std::strerror(error) : fmt::format("{} bytes read", read)));
    }
  }
  // A peer that aborted may have changed that memory before (or while) it was read.
  checkPeerFlags(WaitFor::kMessage, bytes, wait);
}

const std::byte* ShmLink::takeMessage(size_t bytes, bool exact, uint64_t* length,
                                      const WaitContext& wait) {
  checkUsable("recv");
  if (inNext_ - inTail_ - skipped_.size() >= slotCount_) {
    throw InvalidArgument(fmt::format(
        "recv from rank {}: {} messages are already held without release() (the shm link has {} "
        "slots)",
        peer(), inNext_ - inTail_ - skipped_.size(), slotCount_));
  }
  uint64_t word = 0;
  if (!passOver(&word, &wait)) {
    auto ready = [&] { return passOver(&word, &wait); };
    waitUntil(ready, &in_->dataWord, &in_->consumerSleeping, &in_->dataPublished, WaitFor::kMessage,
              bytes, wait);
  }
  if (!readProbed_) [[unlikely]] {
    // The first message from the peer: its link (and probe) exist. Lends to this side start
    // once this side found the peer's token where the peer said it is.
    readProbed_ = true;
    readsPeer_ = peerProbed();
    if (readsPeer_) self_->readsPeer.store(1, std::memory_order_release);
  }
  lastChannel_ = channelOf(word);
  *length = word & Cell::kLengthMask;
  if (!fits(word)) [[unlikely]] {
    throwCorrupt(word, wait);
  }
  if (exact ? *length != bytes : *length > bytes) {
    throw IoError(fmt::format(
        "{}: rank {} sent a message of {} bytes over shm but rank {} expected {}{} bytes (the "
        "ranks disagree about what they are doing)",
        wait.describe(), peer(), *length, rank_, exact ? "" : "at most ", bytes));
  }
  const std::byte* payload = nullptr;
  uint64_t& seq = inChannelSeq_[static_cast<int>(channelOf(word))];
  takenLent_ = (word & Cell::kLent) != 0;
  if (takenLent_) [[unlikely]] {
    // Only a peer told that this side reads it lends (readsPeer).
    if (!readsPeer_) throwCorrupt(word, wait);
  } else if ((word & Cell::kDirect) != 0) [[unlikely]] {
    payload = directPayload(word, seq);
    if (payload == nullptr) throwCorrupt(word, wait);
    tsan::acquire(expectAddress_);
  } else {
    payload = payloadOf(inNext_, word, inLarge_);
  }
  ++seq;
  if ((word & Cell::kInSlot) != 0) ++inLarge_;
  ++inNext_;
  return payload;
}

void ShmLink::throwCorrupt(uint64_t word, const WaitContext& wait) const {
  throw IoError(fmt::format(
      "{}: corrupt shm segment from rank {}: message {} announces {} bytes in {} of {} bytes",
      wait.describe(), peer(), inNext_, word & Cell::kLengthMask,
      (word & Cell::kInSlot) != 0                   ? "a slot"
      : (word & (Cell::kDirect | Cell::kLent)) != 0 ? "memory not offered for it"
                                                    : "a cell",
      (word & Cell::kInSlot) != 0 ? slotBytes_ : kCellPayloadBytes));
}

bool ShmLink::passOverHeld(uint64_t* word, const WaitContext* wait) {
  do {
    if ((*word & Cell::kPointToPoint) == 0) return true;
    if (!fits(*word) || (*word & Cell::kDirect) != 0 ||
        ((*word & Cell::kLent) != 0 && !readsPeer_)) {
      if (wait == nullptr) return false;
      throwCorrupt(*word, *wait);
    }
    const size_t length = *word & Cell::kLengthMask;
    const std::byte* payload = nullptr;
    if ((*word & Cell::kLent) != 0) {
      if (wait == nullptr) return false;  // a look reads no peer memory
      payload = readLentCopy(inNext_, length, *wait);
    } else {
      payload = payloadOf(inNext_, *word, inLarge_);
    }
    if (wait != nullptr) {
      holdPointToPoint(payload, length, *wait);
    } else if (!tryHoldPointToPoint(payload, length)) {
      return false;
    }
    skipMessage(*word);
  } while (announced(inNext_, word));
  return false;
}

void ShmLink::skipMessage(uint64_t word) {
  ++inChannelSeq_[static_cast<int>(channelOf(word))];
  if ((word & Cell::kInSlot) != 0) ++inLarge_;
  if (inNext_++ == inTail_) {
    release();
  } else {
    skipped_.push_back(inNext_ - 1);
  }
}

bool ShmLink::messageReady() noexcept {
  uint64_t word = 0;
  return !aborted_ && passOver(&word, nullptr);
}

const std::byte* ShmLink::peekMessage(size_t* bytes) noexcept {
  uint64_t word = 0;
  if (aborted_ || inNext_ != inTail_ || !passOver(&word, nullptr) || !fits(word) ||
      (word & (Cell::kDirect | Cell::kLent)) != 0) {
    return nullptr;
  }
  *bytes = word & Cell::kLengthMask;
  lastChannel_ = channelOf(word);
  return payloadOf(inNext_, word, inLarge_);
}

void ShmLink::skipPeeked(const WaitContext& wait) {
  uint64_t word = 0;
  if (aborted_ || inNext_ != inTail_ || !announced(inNext_, &word)) [[unlikely]] {
    Link::skipPeeked(wait);  // nothing was peeked: the checked way
    return;
  }
  ++inChannelSeq_[static_cast<int>(channelOf(word))];
  if ((word & Cell::kInSlot) != 0) ++inLarge_;
  ++inNext_;
  release();
}

bool ShmLink::spinForMessage() noexcept {
  return spinUntil(waiter_, [&] { return messageReady(); });
}

Link::Wake ShmLink::armWake(std::atomic<uint32_t>** word, uint32_t* seen) noexcept {
  if (aborted_) return Wake::kNone;  // the caller's look reports it
  // As block() in waitUntil: the flag, a fence (the writer's too, with membarrier fences), then
  // what was published; the writer that publishes after this bumps the word and wakes.
  in_->consumerSleeping.store(kSleeping, std::memory_order_relaxed);
  if (membarrierFences_) {
    membarrierFence();
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  *word = &in_->dataWord;
  *seen = in_->dataWord.load(std::memory_order_acquire);
  // Ready when a message came since the last arm: messages the caller's looks leave here (a
  // collective's, a point-to-point one of another tag) must not keep it from sleeping.
  uint64_t end = inNext_;
  uint64_t announcedWord = 0;
  while (end - inNext_ < kCells && announced(end, &announcedWord)) ++end;
  const bool news = end != wakeEnd_;
  wakeEnd_ = end;
  if (news) {
    disarmWake();
    return Wake::kReady;
  }
  // A peer that closed or aborted wakes nobody again: the caller sleeps by the clock.
  if (other_->state.load(std::memory_order_acquire) !=
      static_cast<uint32_t>(EndpointState::kOpen)) {
    disarmWake();
    return Wake::kNone;
  }
  return Wake::kArmed;
}

void ShmLink::disarmWake() noexcept {
  in_->consumerSleeping.store(kAwake, std::memory_order_relaxed);
}

void ShmLink::release() {
  if (inTail_ == inNext_) {
    throw InvalidArgument(
        fmt::format("release on the shm link from rank {}: no message is held", peer()));
  }
  ++inTail_;
  while (!skipped_.empty() && skipped_.front() == inTail_) [[unlikely]] {
      skipped_.pop_front();
      ++inTail_;
    }
  in_->tail.store(inTail_, std::memory_order_release);
  notify(&in_->spaceWord, &in_->producerSleeping, &in_->spacePublished, membarrierFences_);
}

void ShmLink::recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) {
  if (bytes > 0 && dst == nullptr) {
    throw InvalidArgument(fmt::format(
        "recvInto: destination is null for a message of {} bytes from rank {}", bytes, peer()));
  }
  uint64_t length = 0;
  const std::byte* data = takeMessage(bytes, /*exact=*/true, &length, wait);
  if (takenLent_) {
    readLent(inNext_ - 1, dst, bytes, wait);  // one copy, from the sender's memory
  } else if (bytes > 0 && data != dst) {
    kernels::copy(dst, data, bytes);  // else written there (expect())
  }
  release();
}

uint64_t ShmLink::directTarget(size_t bytes) const {
  const Post& post = out_->post;
  if ((post.state.load(std::memory_order_acquire) & Post::kModeMask) != Post::kPosted) return 0;
  if (post.channel.load(std::memory_order_relaxed) != static_cast<uint32_t>(sendChannel_)) {
    return 0;
  }
  const uint64_t seq = outChannelSeq_[static_cast<int>(sendChannel_)];
  const uint64_t first = post.firstSeq.load(std::memory_order_relaxed);
  const uint64_t step = post.step.load(std::memory_order_relaxed);
  const uint64_t total = post.bytes.load(std::memory_order_relaxed);
  if (seq < first || step == 0 || (seq - first) >= total / step + 1) return 0;
  const uint64_t offset = (seq - first) * step;
  if (offset >= total || std::min(step, total - offset) != bytes) return 0;
  return post.address.load(std::memory_order_relaxed) + offset;
}

bool ShmLink::peerProbed() {
  if (directState_ != 0) return directState_ > 0;
  directState_ = -1;
  const uint64_t address = other_->probeAddress.load(std::memory_order_acquire);
  const uint64_t token = other_->probeToken.load(std::memory_order_relaxed);
  if (address == 0 || token == 0) return false;
  // Within one process there is no other process to tell apart, and the peer's link (with its
  // probe word) may already be gone: a receiver probes at its first message, which a peer may
  // send just before it closes.
  if (!watch_.sameProcess()) {
    uint64_t found = 0;
    iovec local{.iov_base = &found, .iov_len = sizeof(found)};
    iovec remote{.iov_base = reinterpret_cast<void*>(address), .iov_len = sizeof(found)};
    if (::process_vm_readv(watch_.pid(), &local, 1, &remote, 1, 0) !=
            static_cast<ssize_t>(sizeof(found)) ||
        found != token) {
      return false;  // not permitted (ptrace scope, a container's seccomp), or not the peer
    }
  }
  directState_ = 1;
  return true;
}

bool ShmLink::sendDirect(const std::byte* data, size_t bytes, const WaitContext& wait) {
  Post& post = out_->post;
  uint64_t state = post.state.load(std::memory_order_acquire);
  const uint64_t target = directTarget(bytes);
  if (target == 0 || !peerProbed()) return false;
  // Where the slots' writer streams (its ordinary stores have lately waited for lines another
  // die held: SlotWriter), a direct write's ordinary stores into memory the receiver's core holds
  // wait the same way, and the slots cost less then (transports/shm/README.md, "How bytes go
  // into a slot"). Every SlotWriter::kProbeEvery-th message goes through the slots anyway, so that
  // the writer keeps timing both ways and direct writes resume once ordinary stores are cheap.
  if (writer_.mode() == SlotWriter::kStreaming || ++directOffers_ % SlotWriter::kProbeEvery == 0) {
    return false;
  }
  // Where the kernel's copy runs slower at offsets of the target against the source that are not
  // a multiple of 64 (kernel_copy.h, KernelCopyOffsets: 1.5-1.9 GB/s against 8.1-8.5 on a 2-core
  // AMD EPYC VM), the slots' two copies cost less.
  if (!watch_.sameProcess() && (target - reinterpret_cast<uintptr_t>(data)) % 64 != 0 &&
      kernelCopyOffsets().apartSlow()) {
    return false;
  }
  // A cell for the announcement first, so that the post is never held while this side waits.
  auto cellFree = [&] { return outHead_ - outTailSeen_ < kCells; };
  if (!cellFree()) waitForSpace(cellFree, bytes, wait);
  // Taken only if it is still the post read above (same count, still kPosted).
  if ((state & Post::kModeMask) != Post::kPosted ||
      !post.state.compare_exchange_strong(state, (state & ~Post::kModeMask) | Post::kWriting,
                                          std::memory_order_acq_rel)) {
    return false;
  }
  bool written = true;
  if (watch_.sameProcess()) {
    const auto* posted =
        reinterpret_cast<const void*>(post.address.load(std::memory_order_relaxed));
    tsan::acquire(posted);
    kernels::copy(reinterpret_cast<void*>(target), data, bytes);
    tsan::release(posted);
  } else {
    iovec local{.iov_base = const_cast<std::byte*>(data), .iov_len = bytes};
    iovec remote{.iov_base = reinterpret_cast<void*>(target), .iov_len = bytes};
    written =
        ::process_vm_writev(watch_.pid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
  }
  post.state.store(state, std::memory_order_release);  // kPosted again
  if (!written) {
    directState_ = -1;  // the slot path from now on (a partial write is written over)
    return false;
  }
  announce((uint64_t{static_cast<uint32_t>(outHead_ + 1)} << 32) | bytes | channelBit() |
           Cell::kDirect);
  return true;
}

const std::byte* ShmLink::directPayload(uint64_t word, uint64_t seq) const {
  if (!expectActive_ || channelOf(word) != expectChannel_ || seq < expectFirst_) return nullptr;
  const uint64_t piece = seq - expectFirst_;
  if (piece >= expectBytes_ / expectStep_ + 1) return nullptr;
  const uint64_t offset = piece * expectStep_;
  if (offset >= expectBytes_ ||
      (word & Cell::kLengthMask) != std::min(expectStep_, expectBytes_ - offset)) {
    return nullptr;
  }
  return expectAddress_ + offset;
}

void ShmLink::expect(std::byte* dst, size_t bytes, size_t step) {
  if (expectActive_ || directState_ < 0 || aborted_ || dst == nullptr ||
      step < kDirectWriteMinBytes || bytes == 0 || bytes > kDirectMaxBytes || allToAllOnly_) {
    return;
  }
  expectActive_ = true;
  expectAddress_ = dst;
  expectBytes_ = bytes;
  expectStep_ = step;
  expectChannel_ = receiveChannel();
  expectFirst_ = inChannelSeq_[static_cast<int>(expectChannel_)];
  Post& post = in_->post;
  post.address.store(reinterpret_cast<uint64_t>(dst), std::memory_order_relaxed);
  post.bytes.store(bytes, std::memory_order_relaxed);
  post.step.store(step, std::memory_order_relaxed);
  post.firstSeq.store(expectFirst_, std::memory_order_relaxed);
  post.channel.store(static_cast<uint32_t>(expectChannel_), std::memory_order_relaxed);
  tsan::release(dst);
  post.state.store((++postSeq_ << 2) | Post::kPosted, std::memory_order_release);
}

void ShmLink::unexpect() noexcept {
  if (!expectActive_) return;
  expectActive_ = false;
  Post& post = in_->post;
  // A write under way ends within one message's copy, or with the writer's process.
  const Deadline giveUp = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    uint64_t state = (postSeq_ << 2) | Post::kPosted;
    const bool withdrawn =
        post.state.compare_exchange_strong(state, Post::kNone, std::memory_order_acq_rel);
    // Else a write under way (kWriting) is waited for; any other state is not this post's.
    if (withdrawn || (state & Post::kModeMask) != Post::kWriting) {
      tsan::acquire(expectAddress_);  // what the peer wrote there
      return;
    }
    if (Clock::now() > giveUp || !watch_.alive()) return;
    ::sched_yield();
  }
}

void ShmLink::abort(int origin, std::string_view reason) {
  if (aborted_) return;
  aborted_ = true;
  abortReason_ = fmt::format("rank {} aborted: {}", origin, reason);
  size_t length = std::min(reason.size(), kMaxReasonBytes);
  std::memcpy(self_->reason, reason.data(), length);
  self_->reasonBytes = static_cast<uint32_t>(length);
  self_->abortOrigin = origin;
  self_->state.store(static_cast<uint32_t>(EndpointState::kAborted), std::memory_order_release);
  wakeAll();
}

}  // namespace ringlet::transport::shm
