#include "src/core/communicator_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "collectives/select.h"
#include "ringlet/error.h"
#include "src/log.h"
#include "transports/registry.h"

namespace ringlet::detail {

using transport::Clock;
using transport::WaitContext;

// Call headers are never cut: every link promises to carry one in a message.
static_assert(OpHeader::kWireBytes <= transport::Link::kMinMessageBytes);

namespace {

// The next message on `link`, without taking it, when it has arrived and is a collective's call
// header (decoded into `theirs`, its length in `bytes`); else null.
const std::byte* peekCallHeader(transport::Link& link, OpHeader& theirs, size_t& bytes) {
  const std::byte* next = link.peekMessage(&bytes);
  const bool header = next != nullptr && bytes >= OpHeader::kFieldBytes &&
                      bytes <= OpHeader::kWireBytes && OpHeader::decode(next, theirs) &&
                      isCollective(theirs.kind);
  return header ? next : nullptr;
}

}  // namespace

void WorkState::finish(std::exception_ptr e) {
  {
    std::lock_guard lock(mutex);
    error = std::move(e);
    done = true;
  }
  changed.notify_all();
}

CommunicatorImpl::CommunicatorImpl(const Bootstrap& bootstrap, CommunicatorOptions options)
    : rank_(bootstrap.rank),
      size_(bootstrap.size),
      options_(std::move(options)),
      callTimeout_(options_.timeout) {
  forgetChoices();
  const auto deadline = Clock::now() + options_.timeout;
  rendezvous(bootstrap);
  connectInitialLinks(deadline);
  forced_ = collectives::parseForced(options_.algorithms);
  placementSegment_ = placementSegmentBytes(options_.transport, infos_);
  unboundedRing_ = everyLinkUnbounded(options_.transport, infos_);
  if (options_.costModel) model_ = *options_.costModel;
  if (!options_.trace.empty()) {
    trace_ = std::make_unique<trace::Recorder>(options_.trace, rank_, size_, self_.hostId);
  }
}

CommunicatorImpl::CommunicatorImpl(Lineage lineage, CommunicatorOptions options)
    : rank_(lineage.rank),
      size_(lineage.size),
      options_(std::move(options)),
      callTimeout_(options_.timeout) {
  forgetChoices();
  const auto deadline = Clock::now() + options_.timeout;
  self_ = lineage.infos.at(rank_);
  infos_ = std::move(lineage.infos);
  store_ = std::move(lineage.store);
  jobId_ = std::move(lineage.jobId);
  secret_ = std::move(lineage.secret);
  rendezvousHost_ = std::move(lineage.rendezvousHost);
  watchParent_ = std::move(lineage.watchParent);
  connectInitialLinks(deadline);
  watchParent_ = nullptr;  // the parent is watched only while this is made
  forced_ = collectives::parseForced(options_.algorithms);
  placementSegment_ = placementSegmentBytes(options_.transport, infos_);
  unboundedRing_ = everyLinkUnbounded(options_.transport, infos_);
  if (options_.costModel) model_ = *options_.costModel;
  if (!options_.trace.empty()) {  // split() gave the child a path of its own
    trace_ = std::make_unique<trace::Recorder>(options_.trace, rank_, size_, self_.hostId);
  }
}

CommunicatorImpl::~CommunicatorImpl() {
  {
    std::lock_guard lock(queueMutex_);
    stopping_ = true;
  }
  queueChanged_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CommunicatorImpl::runBlocking(OpHeader& header, OpBody&& body) {
  if (isCollective(header.kind)) header.seq = nextSeq_++;
  // Calls are issued from one thread at a time: with no async call queued or running, none can
  // appear before this one runs.
  if (asyncInFlight_.load(std::memory_order_acquire) == 0) {
    // No lock: its two locked instructions per call, each waiting for the stores still in the
    // core's buffer (the last message to a peer among them), cost 8-byte calls over shm about a
    // tenth of their time.
    const OwnLinks own(*this);
    execute(header, body, callTimeout_);
    if (clockRecheckAfter(header)) [[unlikely]]
      measureClockOffsetAgain(false);
    return;
  }
  std::shared_ptr<WorkState> state;
  {
    std::lock_guard lock(queueMutex_);
    if (asyncInFlight_.load(std::memory_order_relaxed) != 0) {
      // Earlier async calls are still queued: run after them, in order.
      state = std::make_shared<WorkState>();
      queue_.push_back(Pending{header, std::move(body), state, callTimeout_});
      asyncInFlight_.fetch_add(1, std::memory_order_relaxed);  // the worker counts it off
    }
  }
  if (state) {
    queueChanged_.notify_all();
    Work(state).wait();
  } else {
    std::lock_guard exec(execMutex_);
    execute(header, body, callTimeout_);
  }
  if (clockRecheckAfter(header)) measureClockOffsetAgain(false);
}

Work CommunicatorImpl::runAsync(OpHeader header, OpBody body, std::shared_ptr<WorkState> state) {
  if (isCollective(header.kind)) header.seq = nextSeq_++;
  if (!state) state = std::make_shared<WorkState>();
  {
    std::lock_guard lock(queueMutex_);
    queue_.push_back(Pending{header, std::move(body), state, callTimeout_});
    asyncInFlight_.fetch_add(1, std::memory_order_relaxed);
    if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  }
  queueChanged_.notify_all();
  if (clockRecheckAfter(header)) measureClockOffsetAgain(true);
  return Work(state);
}

void CommunicatorImpl::workerLoop() {
  std::unique_lock lock(queueMutex_);
  while (true) {
    queueChanged_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Pending item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      std::lock_guard exec(execMutex_);
      execute(item.header, item.body, item.timeout);
    } catch (...) {
      error = std::current_exception();
    }
    item.state->finish(error);
    lock.lock();
    asyncInFlight_.fetch_sub(1, std::memory_order_release);
  }
}

void CommunicatorImpl::throwIfBroken(std::string_view op, uint64_t seq) {
  if (!broken_.load()) return;
  std::string reason;
  bool linksLeft = false;
  {
    std::lock_guard lock(brokenMutex_);
    reason = brokenReason_;
    linksLeft = !linksAborted_;
  }
  // abort() from another thread while the last call ran left the links to that call, which
  // may have ended without a wait that saw the cancel: tell the peers now.
  if (linksLeft) fail(rank_, reason);
  throw AbortedError(
      fmt::format("{} #{} on rank {}: the communicator is unusable after an earlier error: {}", op,
                  seq, rank_, reason));
}

void CommunicatorImpl::execute(const OpHeader& header, const OpBody& body,
                               std::chrono::milliseconds timeout) {
  throwIfBroken(header.name(), header.seq);
  const bool collective = isCollective(header.kind);
  if (!collective) {
    // First message between two ranks that no collective links: connect them now.
    std::vector<int> missing;
    for (int peer : {header.root, header.kind == OpKind::kSendRecv ? header.source : -1}) {
      if (peer >= 0 && linksByRank_[peer] == nullptr &&
          std::find(missing.begin(), missing.end(), peer) == missing.end()) {
        missing.push_back(peer);
      }
    }
    std::sort(missing.begin(), missing.end());
    if (!missing.empty()) {
      try {
        for (int peer : missing) announceLinkTo(peer);  // for a recv from any source there
        const ConnectingFor connecting(*this, header.name(), header.seq);
        connectPeers(missing, Clock::now() + timeout);
      } catch (const std::exception& e) {
        fail(rank_, e.what());
        throw;
      }
    }
  }
  WaitContext wait{.deadline = transport::coarseNow() + timeout,
                   .op = header.name(),
                   .seq = header.seq,
                   .rank = rank_,
                   .links = activeLinks_,
                   .cancelled = &cancelled_,
                   .trace = collective ? trace_.get() : nullptr,
                   // Some rank not linked yet may ask for a link while this call waits.
                   .sideWork = activeLinks_.size() + 1 < static_cast<size_t>(size_)
                                   ? static_cast<transport::WaitSideWork*>(this)
                                   : nullptr};
  Clock::time_point started;
  if (trace_ != nullptr) {
    started = Clock::now();
    if (collective) wait.trace->beginCall(header.seq);
  }
  // Records the call when tracing, however it ends: a collective with its steps (wait.trace),
  // a point-to-point call on its own (outside the collectives' numbering).
  struct TraceCall {
    trace::Recorder* recorder;
    const OpHeader& header;
    Clock::time_point start;
    bool collective;
    int& recvSource;  // a recv that named no peer: whom it took from (-1: nobody); read once
    bool movedNothing = false;  // ran no algorithm (movesNoData): recorded as "none"
    ~TraceCall() {
      if (recorder == nullptr) return;
      const size_t element = elementSize(header.type);
      if (!collective) {
        if (header.kind == OpKind::kProbe) return;  // moves nothing the caller sees
        const bool sends = header.kind != OpKind::kRecv;
        const int to = sends ? header.root : -1;
        const int from = header.kind == OpKind::kRecv
                             ? (header.root >= 0 ? header.root : std::exchange(recvSource, -1))
                         : header.kind == OpKind::kSendRecv ? header.source
                                                            : -1;
        // tryRecv that found nothing: no message, nothing to show.
        if (header.kind == OpKind::kRecv && from < 0) return;
        const uint64_t bytes =
            (header.count + (header.kind == OpKind::kSendRecv ? header.recvCount : 0)) * element;
        recorder->pointToPoint(header.name().data(), to, from, header.seq, bytes, start,
                               Clock::now());
        return;
      }
      recorder->collective(
          header.name().data(),
          movedNothing ? std::string_view("none")
                       : collectives::nameOf(static_cast<collectives::Algorithm>(header.algorithm)),
          header.seq, header.count * element, start, Clock::now());
    }
  } traceCall{trace_.get(), header, started, collective, recvSource_};
  try {
    // A call that moves no data runs as a sender-only call (movesNoData, emptyCall): no body,
    // so nothing can run another call and overwrite running_ while it is in use here.
    const bool empty = collective && size_ > 1 && movesNoData(header);
    running_ = empty ? emptyCall(header) : header;
    traceCall.movedNothing = empty;
    const OpHeader& call = empty ? running_ : header;
    // A call whose one send is a small frame to the next rank, after one alike: a run of them
    // (sendHeader, Link::sendInRun). On two ranks a call that only sends. On more, a link of a
    // small rooted call's chain of headers (the rank that starts it, a relay, the answer to the
    // root) or a call that moves no data, after one of the same root. Over TCP each such frame
    // had left as a segment of its own: 8-64 B broadcasts, reduces, gathers and scatters on 3-4
    // ranks took 6-12 us a call idle, 2.2-6 as runs (bench/results/tcp-chain-runs-2026-11-30);
    // where roots alternate every call, runs held a frame behind the last call's chain and slowed
    // the next one (4 ranks, 17.3 -> 20.6 us a pair of broadcasts), so those go one by one.
    const bool runs =
        collective &&
        (size_ == 2 ? call.sendsOnly
                    : size_ > 2 && (call.sendsOnly || call.relays || call.receivesOnly));
    // An answer owed to the root of earlier chain calls goes first, unless this call is one more
    // of them (which answers, or owes, in its turn).
    if (owedAnswer_ &&
        !(collective && call.receivesOnly && size_ > 2 && call.root == owedAnswer_->root)) {
      sendAnswer(*std::exchange(owedAnswer_, std::nullopt), wait);
    }
    const bool inRun = runs && lastInRun_ && (size_ == 2 || call.root == lastRunRoot_);
    lastInRun_ = runs;
    lastRunRoot_ = call.root;
    if (collective && size_ > 1 && !call.selfChecked) {
      headerChecked_ = false;
      if (call.relays) {
        // The previous rank's header and data first: this rank sends on what it received (after
        // the body has taken it). A header that carries no data (the chain's data follows each
        // header past what one holds, or there is none) goes on at once, before the body sends
        // the data after it.
        checkHeader(wait);
        if (call.inlineBytes == 0) sendHeader(call, wait, inRun);
      } else if (call.receivesOnly && takeWaitingHeader(call, wait, inRun)) {
        // The sender's header and data were here and matched: nothing to send.
      } else if (call.receivesOnly && size_ > 2) {
        sendAnswer(call, wait, inRun);
        checkHeader(wait);
      } else if (call.receivesOnly) {
        // Two ranks, the sender's header not here yet: this rank's first, so that a peer that
        // disagrees names both calls. A sender that sent this call and left since (its end closed:
        // over TCP the send is reset) takes no header; what it sent is still read below, and a
        // peer that failed shows in that read (its abort, or the stream's end), as for the
        // answers of takeWaitingHeader and sendAnswer.
        try {
          sendHeader(call, wait);
        } catch (const PeerError&) {
        }
        if (!call.earlyData) checkHeader(wait);
      } else {
        sendHeader(call, wait, inRun);
        if (call.sendsOnly) {
          // Nothing to read in this call: the peer's answer is read later. Those that have
          // arrived are read now; one is waited for only when too many calls are unsettled.
          // (The peer's answer to this call, when already here, waits for the next call, so
          // that a disagreement shows at one call on both ranks.)
          // Over TCP each look is a read of the socket, half of such a call's system calls:
          // there every kLookEvery-th call looks (and the calls before a wait for an answer).
          transport::Link& prev = group_.prev();
          const size_t limit = uncheckedLimit(call);
          const bool look = !prev.looksCostSystemCalls() || ++callsSinceLook_ >= kLookEvery ||
                            unchecked_.size() >= limit;
          if (look) {
            callsSinceLook_ = 0;
            settleArrived(wait);
          }
          unchecked_.push_back(call);
          while (unchecked_.size() > limit) readSettlingHeader(wait);
          headerChecked_ = true;
          if (look) prev.checkPeer(wait);  // a peer that failed (or disagreed) and aborted
        } else if (!call.earlyData) {
          checkHeader(wait);
        }
      }
    } else if (!unchecked_.empty()) {
      if (collective && size_ > 2) {
        // A call that checks its own headers, with partners' messages that are call headers: the
        // previous rank's answers to this rank's sender-only calls must not be read as those.
        // On more than two ranks every such call is answered (takeWaitingHeader): wait for them.
        while (!unchecked_.empty()) readSettlingHeader(wait);
      } else {
        // A point-to-point call: the peer's answers that are here; those still to come are read
        // before its messages (settlesUnchecked).
        settleArrived(wait);
      }
    }
    if (!empty) body(group_, wait);
    if (!headerChecked_) checkHeader(wait);
    if (call.relays && call.inlineBytes > 0) sendHeader(call, wait, inRun);
    // The header left headerOut_ (an answer's own send flushed it).
    if (collective && size_ > 1 && !(call.receivesOnly && size_ > 2)) group_.next().flush(wait);
  } catch (const TimeoutError& e) {
    // A collective that timed out while point-to-point messages waited for their recv: the
    // likely mistake is a rank that sent them and then did not enter this collective.
    const std::string held = collective ? describeHeldPointToPoint() : std::string();
    if (held.empty()) {
      fail(rank_, e.what());
      throw;
    }
    const std::string what = fmt::format("{}; {}", e.what(), held);
    fail(rank_, what);
    throw TimeoutError(what);
  } catch (const PeerError& e) {
    if (collective && !headerChecked_) {
      // The previous rank may have failed because it read our call and disagreed; its header,
      // sent before it aborted, may still be waiting here. Read it briefly so this rank, too,
      // names both calls (MismatchError) rather than only the abort.
      WaitContext brief = wait;
      brief.deadline = std::min(wait.deadline, Clock::now() + std::chrono::milliseconds(200));
      try {
        checkHeader(brief);
      } catch (const MismatchError& mismatch) {
        fail(rank_, mismatch.what());
        throw;
      } catch (const std::exception&) {
        // No header to read: report the peer's failure as it came.
      }
    }
    fail(e.peer(), e.what());
    throw;
  } catch (const AbortedError& e) {
    if (!cancelled_.load()) {
      fail(rank_, e.what());
      throw;
    }
    // abort() from another thread: the wait that saw it names the call, abort() the reason.
    std::string reason;
    {
      std::lock_guard lock(brokenMutex_);
      reason = brokenReason_;
    }
    fail(rank_, reason);
    throw AbortedError(fmt::format("{}: {}", e.what(), reason));
  } catch (const std::exception& e) {
    fail(rank_, e.what());
    throw;
  }
}

std::string CommunicatorImpl::describeHeldPointToPoint() {
  std::string out;
  for (transport::Link* link : activeLinks_) {
    const auto& held = link->heldPointToPoint();
    if (held.empty()) continue;
    out += fmt::format("{}rank {} sent point-to-point messages that no recv took ({} bytes held)",
                       out.empty() ? "while it waited, " : ", ", link->peer(), link->heldBytes());
  }
  return out;
}

size_t CommunicatorImpl::uncheckedLimit(const OpHeader& call) const {
  if (group_.prev().queueMessages() != 0) return kMaxUnchecked;
  // At two ranks the answers come from the one peer that the sender writes to, and a sender
  // waiting for room on that link reads ahead what the peer sends (TcpLink::flush): no cycle.
  if (size_ == 2) return kMaxUncheckedUnbounded;
  if (!unboundedRing_) return kMaxUnchecked;
  // More: the calls' frames pass every link of the ring, and a rank whose send waits for room
  // reads ahead only from the rank it sends to, so a ring of full links could wait on itself.
  // Links of unbounded queues fill only their sockets' buffers: the frames in flight stay far
  // below those, kUnsettledChainBytes (a frame as its fields and the most data a chain carries
  // for the call; never fewer calls than kMaxUnchecked, as on any link).
  const size_t payload = std::min(kChainPayloadBytes,
                                  static_cast<size_t>(call.count) * elementSize(call.type) * size_);
  return std::clamp(kUnsettledChainBytes / (OpHeader::kFieldBytes + payload), kMaxUnchecked,
                    kMaxUncheckedUnbounded);
}

void CommunicatorImpl::sendHeader(const OpHeader& header, const WaitContext& wait, bool inRun) {
  const size_t bytes = header.wireBytes();
  transport::Link& next = group_.next();
  // Straight into the transport's slot when it has one; else into headerOut_, which stays
  // unchanged until the flush at the end of the call.
  std::byte* out = next.sendBuffer(bytes, headerOut_.data(), wait);
  header.encodeTo(out);
  skippedHeaders_ = 0;
  owedAnswer_.reset();  // this header, numbered at or past the owed call, settles it
  // With earlyData the body's first send to the same link follows at once: pack them. The
  // header of a run of two-rank calls that only send (a root's small broadcasts) the link may
  // pack with the next ones as they come (Link::sendInRun).
  if (header.earlyData) {
    next.sendMore(out, bytes, wait);
  } else if (inRun) {
    next.sendInRun(out, bytes, wait);
  } else {
    next.send(out, bytes, wait);
  }
}

void CommunicatorImpl::sendAnswer(const OpHeader& header, const WaitContext& wait, bool inRun) {
  try {
    sendHeader(header, wait, inRun);
    group_.next().flush(wait);
  } catch (const PeerError&) {
    // More than two ranks: the answer goes to the rank that sent the chain's data, which returned
    // once it had sent it and may have closed its links since (its last call). Nobody waits for
    // the answer then; a peer that aborted instead fails this rank's next call on that link.
  }
}

void CommunicatorImpl::checkHeader(const WaitContext& wait) {
  if (headerChecked_) return;
  headerChecked_ = true;
  readRunningHeader(wait);
}

// Two-rank calls in which one rank only sends (OpHeader::sendsOnly) return on that rank once its
// header and data are sent; it keeps the call in unchecked_ until the peer answers. The peer
// answers each call with its own header (a mismatch names both calls), or, when it only receives
// and found this rank's header and data waiting and matching, with nothing: its next header
// (whose sequence number is higher) then says it passed those calls, which it does only after
// checking them. So a header numbered s settles every unchecked call before s.
bool CommunicatorImpl::settlesUnchecked(const OpHeader& theirs, const WaitContext& wait) {
  if (unchecked_.empty() || !isCollective(theirs.kind) || theirs.seq > unchecked_.back().seq) {
    return false;
  }
  while (unchecked_.front().seq < theirs.seq) unchecked_.pop_front();
  if (unchecked_.front().seq != theirs.seq) return true;
  const OpHeader mine = unchecked_.front();
  unchecked_.pop_front();
  if (mine.sameCall(theirs)) return true;
  const std::string why =
      movesNoData(mine)
          ? fmt::format(
                " (call #{} moved no data and returned on rank {} once its header was "
                "sent: such a call reads the previous rank's call at a later one)",
                mine.seq, rank_)
          : fmt::format(
                " (call #{} returned on rank {} once its data was sent: a rank that only "
                "sends in a two-rank call reads its peer's call at a later one)",
                mine.seq, rank_);
  throw MismatchError(describeMismatch(wait.describe(), rank_, mine, group_.prev().peer(), theirs) +
                      why);
}

void CommunicatorImpl::readSettlingHeader(const WaitContext& wait) {
  transport::Link& prev = group_.prev();
  size_t bytes = 0;
  const std::byte* in = prev.recvAny(OpHeader::kWireBytes, &bytes, wait);
  OpHeader theirs;
  const bool ok = bytes >= OpHeader::kFieldBytes && OpHeader::decode(in, theirs);
  prev.release();
  if (!ok) {
    throw IoError(fmt::format("{}: rank {} sent something that is not a call header",
                              wait.describe(), prev.peer()));
  }
  // The peer answers at least every kConfirmEvery calls, so the answer that settles the oldest
  // comes before any header of a call this rank has not made.
  if (!settlesUnchecked(theirs, wait)) {
    throw MismatchError(
        describeMismatch(wait.describe(), rank_, unchecked_.front(), prev.peer(), theirs));
  }
}

void CommunicatorImpl::settleArrived(const WaitContext& wait) {
  if (unchecked_.empty()) return;
  transport::Link& prev = group_.prev();
  // Most calls find nothing: the peer answers every kConfirmEvery calls.
  while (!unchecked_.empty() && prev.messageReady()) {
    if (prev.canPeek()) {
      // Only what answers unchecked_: a later call's header stays for that call.
      size_t bytes = 0;
      OpHeader theirs;
      if (peekCallHeader(prev, theirs, bytes) == nullptr) return;
      if (theirs.seq > unchecked_.back().seq) {
        unchecked_.clear();  // the peer passed them all: each checked, or answered before this
        return;
      }
      prev.skipPeeked(wait);  // decoded already: as readSettlingHeader() without reading again
      if (!settlesUnchecked(theirs, wait)) {
        throw MismatchError(
            describeMismatch(wait.describe(), rank_, unchecked_.front(), prev.peer(), theirs));
      }
      continue;
    }
    readSettlingHeader(wait);
  }
}

bool CommunicatorImpl::takeWaitingHeader(const OpHeader& header, const WaitContext& wait,
                                         bool inRun) {
  transport::Link& prev = group_.prev();
  if (!prev.canPeek()) return false;
  // A short wait (the link's spin, if spinning pays here) before this rank's own header goes:
  // the sender is usually a moment behind.
  if (!prev.spinForMessage()) return false;
  for (;;) {
    size_t bytes = 0;
    OpHeader theirs;
    const std::byte* in = peekCallHeader(prev, theirs, bytes);
    if (in == nullptr) return false;
    if (settlesUnchecked(theirs, wait)) {
      prev.skipPeeked(wait);  // the header just settled
      continue;
    }
    // Anything else goes the usual way: this rank's header first, so a peer that disagrees
    // names both calls too.
    const size_t inBytes = header.inlineFromPrevBytes();
    if (!header.sameCall(theirs) || bytes != OpHeader::kFieldBytes + inBytes) return false;
    copySmall(inlineIn_.data(), in + OpHeader::kFieldBytes, inBytes);
    prev.skipPeeked(wait);
    unchecked_.clear();  // all before this call, which the peer has passed
    headerChecked_ = true;
    // Two ranks: the sender learns from a later header that this call passed. More: the sender
    // of the chain (the next rank) reads an answer every kConfirmEvery calls, and one that this
    // rank owes it before anything else this rank sends it (owedAnswer_, execute), so that a
    // call that checks its own headers can wait for all of them first.
    if (size_ > 2) {
      if (++skippedHeaders_ >= kConfirmEvery) {
        sendAnswer(header, wait, inRun);
      } else {
        // Its fields only: the inline data lies in the caller's memory, gone once the call
        // returns (an answer's data is never read; the root compares the fields).
        owedAnswer_ = header;
        owedAnswer_->inlineData = nullptr;
        owedAnswer_->inlineBytes = 0;
      }
    } else if (++skippedHeaders_ >= kConfirmEvery) {
      try {
        sendHeader(header, wait);
      } catch (const PeerError&) {
        // The sender has closed its end since: it sent this call and those after it before it
        // left (up to kMaxUncheckedUnbounded of them over TCP), and they are still read here;
        // nobody waits for the answer. A sender that failed instead shows in a later read (its
        // abort, or the stream's end where data is missing).
        skippedHeaders_ = 0;
      }
    }
    return true;
  }
}

void CommunicatorImpl::readRunningHeader(const WaitContext& wait) {
  transport::Link& prev = group_.prev();
  const OpHeader& expected = running_;
  size_t bytes = 0;
  OpHeader theirs;
  bool ok = false;
  const std::byte* in = nullptr;
  for (;;) {
    in = prev.recvAny(OpHeader::kWireBytes, &bytes, wait);
    ok = bytes >= OpHeader::kFieldBytes && OpHeader::decode(in, theirs);
    // The peer's answers to this rank's earlier sender-only calls come first.
    if (!ok || !settlesUnchecked(theirs, wait)) break;
    prev.release();
  }
  const bool same = ok && expected.sameCall(theirs);
  const size_t inBytes = expected.inlineFromPrevBytes();
  if (same && inBytes > 0) {
    if (bytes != OpHeader::kFieldBytes + inBytes) {
      prev.release();
      throw IoError(fmt::format("{}: rank {} sent a call header of {} bytes for {} (expected {})",
                                wait.describe(), prev.peer(), bytes, theirs.describeCall(),
                                OpHeader::kFieldBytes + inBytes));
    }
    std::memcpy(inlineIn_.data(), in + OpHeader::kFieldBytes, inBytes);
  }
  prev.release();
  if (!ok) {
    throw IoError(fmt::format("{}: rank {} sent something that is not a call header",
                              wait.describe(), prev.peer()));
  }
  if (!same) {
    throw MismatchError(describeMismatch(wait.describe(), rank_, expected, prev.peer(), theirs));
  }
  unchecked_.clear();  // all before this call, which the peer has passed
}

void CommunicatorImpl::fail(int origin, const std::string& reason) {
  {
    std::lock_guard lock(brokenMutex_);
    if (!broken_.load()) {
      brokenReason_ = reason;
      broken_.store(true);
    }
    if (linksAborted_) return;
    linksAborted_ = true;
  }
  log::warn("rank {}: communicator failed: {}", rank_, reason);
  // Tell every peer, so ranks that do not talk to the failed one directly fail fast too. A
  // forwarded failure keeps its first cause rather than growing a prefix at every hop.
  std::string_view cause = reason;
  const std::string prefix = fmt::format("rank {} aborted: ", origin);
  while (cause.substr(0, prefix.size()) == prefix) cause.remove_prefix(prefix.size());
  for (transport::Link* link : activeLinks_) link->abort(origin, cause);
}

void CommunicatorImpl::setCallTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    throw InvalidArgument(
        fmt::format("setCallTimeout on rank {}: timeout {} ms is negative (0: "
                    "the communicator's, {} ms)",
                    rank_, timeout.count(), options_.timeout.count()));
  }
  callTimeout_ = timeout.count() == 0 ? options_.timeout : timeout;
}

void CommunicatorImpl::abort(const std::string& reason) {
  cancelled_.store(true);
  const std::string why = fmt::format("rank {} called abort: {}", rank_, reason);
  {
    std::lock_guard lock(brokenMutex_);
    if (!broken_.load()) {
      brokenReason_ = why;
      broken_.store(true);
    }
  }
  // A collective running on another thread (the worker, or a blocking call) owns the links: it
  // sees the cancel flag within one wait slice and fails (aborting the links) itself. Otherwise
  // abort them here. The other side of the fence is runBlocking's: a blocking call that starts
  // after this reads broken_ as set (execute() fails it before it touches a link), or this reads
  // its flag.
  fences::heavy(asymmetricFences_);
  std::unique_lock exec(execMutex_, std::try_to_lock);
  if (exec.owns_lock() && !inBlockingCall_.load()) fail(rank_, why);
}

std::string CommunicatorImpl::describeLinks() const {
  std::string out;
  for (const transport::Link* link : activeLinks_) {
    if (!out.empty()) out += ", ";
    // "+direct": lent messages and direct writes on (shm: RINGLET_SHM_DIRECT, measured);
    // "+direct(all-to-all)": the all-to-all's lent blocks only (Link::lendsForAllToAllOnly);
    // "+direct(<= 4 MiB)": blocks up to that size lent (Link::lendBlockBytes).
    std::string direct = link->directBytes() == 0       ? ""
                         : link->lendsForAllToAllOnly() ? "+direct(all-to-all)"
                                                        : "+direct";
    if (!direct.empty() && link->lendBlockBytes() != SIZE_MAX) {
      direct += fmt::format("(<= {} KiB)", link->lendBlockBytes() >> 10);
    }
    // "+sealed": the link's bytes sealed against the network (tcp: RINGLET_SOCKET_ENCRYPT=1).
    out += fmt::format("{}:{}{}{}", link->peer(), link->transportName(), direct,
                       link->sealed() ? "+sealed" : "");
  }
  return out.empty() ? "none (world of one)" : out;
}

size_t CommunicatorImpl::segmentBytes() const {
  if (options_.segmentBytes > 0) return options_.segmentBytes;
  // Every rank on one host over TCP, more ranks than cores: each wait for a slice can cost a
  // switch between processes, so fewer, larger slices. 4 ranks on 2 cores with a busy loop per
  // core, all-reduce 16-64 MiB: 0.73-0.87 GB/s with 4 MiB slices against 0.53-0.59 with 512 KiB
  // (through PyTorch 1.19-1.52x Gloo's rate against 0.87-0.97x); idle 1.29-1.35 GB/s against
  // 1.33-1.47 (two runs, inside their spread). Only where every link is TCP and every rank
  // decides alike (the slice must be the same at both ends).
  // Over shared memory the other way, where two or more ranks take turns on each core: smaller
  // slices. 4 ranks on 2 cores (an AMD EPYC VM, 1 MiB of L2 a core), every op of 1-64 MiB, two
  // series of runs of the build before and after in turns (six rounds): 256 KiB slices took
  // 0.93x the time of 512 KiB ones (median of the 32 op sizes, 17 of them under 0.95x and 4 over
  // 1.05x; the 1-4 MiB all-gathers, all-reduces and reduce-scatters 0.66-0.87x), 8 ranks there
  // 0.87x; 3 ranks (1.5 a core) came out level (1.00x and 1.05x in two series), 2 ranks with a
  // core each 0.98x (bench/results/shared-cores-slices-2026-12-02/). The ranks' placement, not
  // the cost model, decides (placementSegmentBytes), so the calibration measures with the slice
  // the calls use.
  return placementSegment_;
}

size_t CommunicatorImpl::sliceBytes(std::initializer_list<const transport::Link*> links) const {
  return collectives::sliceBytes(segmentBytes(), links);
}

size_t CommunicatorImpl::directSegmentBytes() const {
  return options_.segmentBytes > 0 ? options_.segmentBytes
                                   : std::max(placementSegment_, collectives::kDefaultSegmentBytes);
}

size_t CommunicatorImpl::messageSliceBytes(const transport::Link& link) const {
  return collectives::sliceBytes(directSegmentBytes(), {&link});
}

size_t CommunicatorImpl::exchangeSliceBytes() const {
  return collectives::sliceBytes(directSegmentBytes(), {});
}

namespace {

// The data a kHeaderInline call's header carries, for a call of `bytes` on `size` ranks: the
// whole buffer for broadcast and reduce; for a gather every block but the root's (on more than
// two ranks the chain's last message, the largest); for a scatter every block on more than two
// ranks; otherwise (two ranks) the other rank's half.
size_t inlineMessageBytes(collectives::Collective collective, size_t bytes, int size) {
  using collectives::Collective;
  if (collective == Collective::kBroadcast || collective == Collective::kReduce) return bytes;
  if (collective == Collective::kGather) return bytes - bytes / size;
  if (collective == Collective::kScatter && size > 2) return bytes;
  return bytes / 2;
}

// More than two ranks: the calls that choose kHeaderInline without a chain, whose every message
// is a call header checked by its receiver (header_framing.h).
bool checksOwnHeaders(collectives::Collective collective) {
  using collectives::Collective;
  return collective == Collective::kAllgather || collective == Collective::kReduceScatter ||
         collective == Collective::kAllToAll;
}

}  // namespace

template <typename Compute>
uint8_t CommunicatorImpl::cachedChoice(size_t slot, size_t bytes, Compute&& compute) const {
  constexpr uint64_t kLargest = (uint64_t{1} << 56) - 2;  // bytes that fit beside the value
  const bool cacheable = bytes <= kLargest;
  if (cacheable) {
    const uint64_t seen = choices_[slot].load(std::memory_order_relaxed);
    if (seen != kNoChoice && (seen >> 8) == bytes) return static_cast<uint8_t>(seen & 0xff);
  }
  const uint8_t value = compute();
  if (cacheable) choices_[slot].store((uint64_t{bytes} << 8) | value, std::memory_order_relaxed);
  return value;
}

void CommunicatorImpl::forgetChoices() const {
  for (auto& slot : choices_) slot.store(kNoChoice, std::memory_order_relaxed);
}

collectives::AllreduceChoice CommunicatorImpl::allreduceChoice(size_t bytes) const {
  constexpr uint8_t kEarlyData = 0x80;
  const uint8_t packed = cachedChoice(collectives::kCollectiveCount, bytes, [&] {
    const collectives::AllreduceChoice choice = collectives::chooseAllreduce(
        rank_, size_, bytes, OpHeader::kInlineBytes, modelSliceBytes(), model_,
        forced(collectives::Collective::kAllreduce), modelHosts_);
    return static_cast<uint8_t>(static_cast<uint8_t>(choice.algorithm) |
                                (choice.earlyData ? kEarlyData : 0));
  });
  return {static_cast<collectives::AllreduceAlgorithm>(packed & ~kEarlyData),
          (packed & kEarlyData) != 0};
}

collectives::Algorithm CommunicatorImpl::algorithmFor(collectives::Collective collective,
                                                      size_t bytes) const {
  return static_cast<collectives::Algorithm>(
      cachedChoice(static_cast<size_t>(collective), bytes,
                   [&] { return static_cast<uint8_t>(computeAlgorithmFor(collective, bytes)); }));
}

collectives::Algorithm CommunicatorImpl::computeAlgorithmFor(collectives::Collective collective,
                                                             size_t bytes) const {
  using collectives::Collective;
  if (size_ == 1) return collectives::Algorithm::kAuto;
  // Data that fits a call header rides in it, unless an algorithm is forced: on two ranks one
  // message each way, on more as below. (The v-forms decide by their blocks: chooseForBlocks;
  // here, as algorithmFor(collective, bytes) asks, they get the model's choice for even ones.)
  const bool inlineable =
      collective != Collective::kAllreduce && collective != Collective::kBarrier &&
      collective != Collective::kAllgatherv && collective != Collective::kReduceScatterv &&
      collective != Collective::kGatherv && collective != Collective::kScatterv;
  if (!inlineable || forced(collective) != collectives::Algorithm::kAuto) {
    return collectives::choose(collective, size_, bytes, modelSliceBytes(), model_,
                               forced(collective), modelHosts_);
  }
  if (size_ == 2 && inlineMessageBytes(collective, bytes, size_) <= OpHeader::kInlineBytes) {
    return collectives::Algorithm::kHeaderInline;
  }
  if (size_ > 2 && checksOwnHeaders(collective)) {
    // Small enough, every message is a call header carrying the data, by recursive doubling,
    // which needs no round of headers first and takes no more steps than Bruck or recursive
    // halving after one. (The all-to-all's exchange is the N x N matrix of blocks.)
    // Past what a header holds, up to kChainPayloadBytes, the data follows each header (not the
    // all-to-all's matrix: past a header its blocks go straight to their ranks, one message each).
    const size_t exchanged = collective == Collective::kAllToAll ? bytes * size_ : bytes;
    const size_t most = collective == Collective::kAllToAll
                            ? std::min(OpHeader::kInlineBytes, headerDoublingBytes())
                            : headerDoublingBytes();
    if (bytes > 0 && exchanged <= most) {
      return collectives::Algorithm::kHeaderInline;
    }
  } else if ((size_ > 2 || collective == Collective::kBroadcast ||
              collective == Collective::kReduce || collective == Collective::kGather ||
              collective == Collective::kScatter) &&
             inlineMessageBytes(collective, bytes, size_) <=
                 (size_ == 2 ? twoRankPayloadBytes(collective) : kChainPayloadBytes) &&
             size_ - 1 <= 1 + static_cast<int>(std::bit_width(static_cast<unsigned>(size_ - 1)))) {
    // A small rooted call's data rides in the call headers along the ring (N-1 messages one
    // after another, none waited for by the rank that starts them): a broadcast's from the root,
    // a scatter's blocks from the root (all of them, each rank taking its own), a reduce's partial
    // results and a gather's growing blocks towards the root from the rank after it. The tree
    // instead waits for the ring's round of headers and then takes ceil(log2 N) steps. Every
    // message costs the model's alpha, so the chain is chosen while it takes no more of them.
    // Past what a header holds, up to kChainPayloadBytes in the largest message, the data follows
    // each header (on two cores, N = 4, 512 B-8 KiB broadcast: 3-9 us, the tree 11-41). On two
    // ranks the chain is one header and the data after it (a scatter's: the other's block),
    // where the tree waits for the peer's header: over TCP, 512 B-8 KiB broadcast and reduce
    // took 9.4-10.4 us by the tree, Open MPI's eager send 5.9-6.5.
    return collectives::Algorithm::kHeaderInline;
  }
  return collectives::choose(collective, size_, bytes, modelSliceBytes(), model_,
                             forced(collective), modelHosts_);
}

bool CommunicatorImpl::doublesOverHeaders(collectives::Collective collective) const {
  const bool rooted = collective == collectives::Collective::kGatherv ||
                      collective == collectives::Collective::kScatterv;
  // (std::bit_width returns int in C++20 as published, the argument's type in older libraries.)
  const int after = size_ - 1;
  return !rooted || after > 1 + static_cast<int>(std::bit_width(static_cast<unsigned>(after)));
}

collectives::Algorithm CommunicatorImpl::chooseForBlocks(OpHeader& header,
                                                         collectives::Collective collective,
                                                         std::span<const collectives::Piece> blocks,
                                                         size_t element, int first) const {
  collectives::Algorithm algorithm = collectives::Algorithm::kAuto;
  if (size_ > 1) {
    const size_t n = blocks.size();
    size_t total = 0;
    size_t largest = 0;
    for (const collectives::Piece& block : blocks) {
      total += block.count * element;
      largest = std::max(largest, block.count * element);
    }
    // Gather-v and scatter-v move only the non-root's block (`first` is the root).
    const bool rooted = collective == collectives::Collective::kGatherv ||
                        collective == collectives::Collective::kScatterv;
    const size_t moved = rooted && n == 2 ? blocks[1 - first].count * element : largest;
    if (forced(collective) == collectives::Algorithm::kAuto && size_ == 2 &&
        moved <= (rooted ? twoRankPayloadBytes(collective) : OpHeader::kInlineBytes)) {
      // Two ranks: each block rides in a call header, one message each way (or one, rooted);
      // the prepare function says what this rank's header carries (inlineBlocks). The rooted
      // ones' block past a header follows it at once, and the sender returns, as gather's and
      // scatter's chain of one hop (the tree's sender waited for the root's header: over TCP
      // 9.5-10.7 us a call at 504 B-4 KiB against Open MPI's 6.0-6.6).
      algorithm = collectives::Algorithm::kHeaderInline;
    } else if (const bool doubling = doublesOverHeaders(collective);
               forced(collective) == collectives::Algorithm::kAuto && size_ > 2 &&
               (total > 0 || !doubling) &&
               total <= (doubling ? headerDoublingBytes() : kChainPayloadBytes)) {
      // More ranks. Gather-v and scatter-v while a chain takes no more messages than a tree
      // (computeAlgorithmFor): the blocks along the ring in the call headers, as gather's and
      // scatter's (up to 256 bytes in all; past that, up to kChainPayloadBytes, each header
      // followed by them). Otherwise every block in place in a packed buffer of
      // all of them, the others zero, summed byte-wise (or reduced) by recursive doubling over
      // call headers that carry it (header.selfChecked; past 256 bytes, up to kChainPayloadBytes,
      // each header followed by it): no round of headers first, log2 N messages.
      // A chain's blocks may all be empty, as gather's and scatter's of zero count ride the
      // chain (on 3 and 4 ranks sharing 2 cores, gather-v and scatter-v of zero counts took
      // 1.3-1.8 us by the tree's round of headers, gather and scatter 0.2-0.4 by the chain).
      algorithm = collectives::Algorithm::kHeaderInline;
      header.selfChecked = doubling;
    } else {
      auto compute = [&] {
        std::vector<size_t> bytes(n);  // in turn from block `first`
        for (size_t u = 0; u < n; ++u) bytes[u] = blocks[(first + u) % n].count * element;
        return static_cast<uint8_t>(collectives::chooseForBlocks(
            collective, bytes, modelSliceBytes(), model_, forced(collective), modelHosts_));
      };
      // A call repeated with the same counts (a fingerprint of them: every rank's call has it)
      // skips the model; algorithmFor(collective, blocks) passes none and always computes.
      const uint64_t key = (header.countsHash ^ (element * 0x9E3779B97F4A7C15ULL) ^
                            (static_cast<uint64_t>(first) * 0xC2B2AE3D27D4EB4FULL)) >>
                           8;
      algorithm = static_cast<collectives::Algorithm>(
          header.countsHash == 0
              ? compute()
              : cachedChoice(kBlockChoiceSlots + static_cast<size_t>(collective), key, compute));
    }
  }
  header.algorithm = static_cast<uint8_t>(algorithm);
  return algorithm;
}

void CommunicatorImpl::inlineBlocks(OpHeader& header, const void* out, size_t outBytes,
                                    size_t inBytes, PairRole role) const {
  header.inlineData = static_cast<const std::byte*>(out);
  header.inlineBytes = outBytes;
  if (inBytes != outBytes) header.inlineInBytes = inBytes;
  header.sendsOnly = role == PairRole::kSendsOnly;
  header.receivesOnly = role == PairRole::kReceivesOnly;
  header.relays = role == PairRole::kRelays;
}

collectives::Algorithm CommunicatorImpl::chooseFor(OpHeader& header,
                                                   collectives::Collective collective, size_t bytes,
                                                   const void* message, PairRole role) const {
  const collectives::Algorithm algorithm = algorithmFor(collective, bytes);
  header.algorithm = static_cast<uint8_t>(algorithm);
  if (algorithm == collectives::Algorithm::kHeaderInline && size_ > 2 &&
      checksOwnHeaders(collective)) {
    header.selfChecked = true;  // the body's messages are headers: none carries data
  } else if (algorithm == collectives::Algorithm::kHeaderInline) {
    const size_t inlineBytes = inlineMessageBytes(collective, bytes, size_);
    // Past what a header holds (a chain up to kChainPayloadBytes) the data follows the header,
    // which carries none.
    header.inlineData =
        inlineBytes <= OpHeader::kInlineBytes ? static_cast<const std::byte*>(message) : nullptr;
    header.inlineBytes = inlineBytes <= OpHeader::kInlineBytes ? inlineBytes : 0;
    header.sendsOnly = role == PairRole::kSendsOnly;
    header.receivesOnly = role == PairRole::kReceivesOnly;
    header.relays = role == PairRole::kRelays;
    // Two ranks, the data after the header: the sender's header waits for the body's send of it
    // (TCP writes both in one system call; over TCP two sends took 11.5-12 us a call at 512 B-8
    // KiB, the tree 9.4-10.4).
    sendFirstOnTwoRanks(header, header.sendsOnly && inlineBytes > OpHeader::kInlineBytes,
                        inlineBytes);
  } else {
    sendFirstOnTwoRanks(
        header, role == PairRole::kSendsOnly && algorithm == collectives::Algorithm::kTree, bytes);
  }
  return algorithm;
}

void CommunicatorImpl::sendFirstOnTwoRanks(OpHeader& header, bool sendsFirst, size_t bytes) const {
  // The data follows the call header at once, and the peer's header is checked after the first
  // message (the body's afterFirstSend), not before; a rank that receives first checks before
  // it reads. So a rank that only sends runs its next call's send beside the peer's receive of
  // this one, where it waited a round trip of headers per call. N = 2, reduce, us: 4 KiB
  // 0.90-0.97 against 1.44-1.47, 64 KiB 4.6-4.9 against 7.7-9.3, 1 MiB 115-123 against 146-153
  // (three alternating runs); the all-gather's exchange saves the round trip: 8 KiB 1.4-1.6
  // against 1.75-1.8. Not at zero bytes: a header held back for the data after it (TCP's
  // sendMore) needs that data.
  header.earlyData = size_ == 2 && sendsFirst && bytes > 0;
}

size_t CommunicatorImpl::modelSliceBytes() const {
  return collectives::sliceBytes(segmentBytes(), {});
}

}  // namespace ringlet::detail
