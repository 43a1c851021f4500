// Trace mode's clock exchange: where each rank's steady clock stands against rank 0's, measured
// once at the end of creation so that `ringlet-trace merge` can put ranks of other hosts on rank
// 0's clock (ranks of one host share a monotonic clock already). Cristian's algorithm, as NTP
// does it for one server:
//
//   rank r (its clock)                         rank 0 (its clock)
//   sent     ── ping (0 bytes) ──────────────>
//                                              rank0 = now
//            <────────── answer (rank0, 8 B) ──
//   received
//
// Rank 0 read `rank0` somewhere between `sent` and `received` on rank r's clock, so its clock is
// ahead of rank r's by rank0 - (sent + received) / 2, give or take half the round trip. Of
// kClockSamples ping-pongs the one with the shortest round trip is kept (trace::
// estimateClockOffset): queueing, a descheduled rank and a cold cache only lengthen a round trip.
//
// Rank 0 answers the ranks one after another, each for all its samples; a rank that waits for its
// turn meanwhile sees a long first round trip, which loses. The pings go over the link between
// rank 0 and the rank, made here where no algorithm needed one. Like the cost model's measurement
// it is a collective call of its own (OpKind::kClockOffset: ranks that disagree, one tracing and
// one not, fail with MismatchError) after which sequence numbers restart at 0. (N - 1) x
// kClockSamples round trips on rank 0: 13 us for 2 ranks on one host, about 1 ms for 4 ranks on
// 2 cores; nothing at all when tracing is off. 32 samples: on a host whose cores are busy with
// others' work, more chances that one ping-pong runs undisturbed, for little time.
//
// Clocks drift apart (tens of ppm between hosts: a millisecond in a minute), so a long run
// exchanges again after calls 2^10 - 1, 2^11 - 1, ... (clockRecheckDue: every rank decides alike
// from the calls' numbers, and the exchange takes the next one): the last such measurement lies
// at least halfway through the run, and `ringlet-trace merge` draws a line through them. Not at
// the communicator's destruction, which is local: a rank there cannot wait for the others.
#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include "src/core/communicator_impl.h"
#include "src/log.h"

namespace ringlet::detail {
namespace {

constexpr int kClockSamples = 32;

int64_t nanoseconds(transport::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Rank 0's side with one peer: answers each ping with its clock.
void answerPings(transport::Link& link, const transport::WaitContext& wait) {
  std::array<std::byte, sizeof(int64_t)> scratch{};
  for (int i = 0; i < kClockSamples; ++i) {
    link.recvInto(nullptr, 0, wait);
    const int64_t now = nanoseconds(transport::Clock::now());
    std::byte* out = link.sendBuffer(sizeof(now), scratch.data(), wait);
    std::memcpy(out, &now, sizeof(now));
    link.send(out, sizeof(now), wait);
    link.flush(wait);  // `scratch` is reused by the next answer
  }
}

// The other ranks' side: kClockSamples ping-pongs with rank 0.
trace::ClockOffset pingRankZero(transport::Link& link, const transport::WaitContext& wait) {
  std::vector<trace::ClockSample> samples(kClockSamples);
  for (trace::ClockSample& s : samples) {
    s.sentNs = nanoseconds(transport::Clock::now());
    link.send(link.sendBuffer(0, nullptr, wait), 0, wait);
    link.recvInto(reinterpret_cast<std::byte*>(&s.rank0Ns), sizeof(s.rank0Ns), wait);
    s.receivedNs = nanoseconds(transport::Clock::now());
    link.flush(wait);
  }
  return trace::estimateClockOffset(samples);
}

}  // namespace

OpBody CommunicatorImpl::clockExchange() {
  return [this](const collectives::Group&, const transport::WaitContext& wait) {
    // Rank 0 links every rank it has no link to yet; each of those links rank 0.
    std::vector<int> missing;
    if (rank_ == 0) {
      for (int peer = 1; peer < size_; ++peer) {
        if (linksByRank_[peer] == nullptr) missing.push_back(peer);
      }
    } else if (linksByRank_[0] == nullptr) {
      missing.push_back(0);
    }
    if (!missing.empty()) connectPeers(missing, wait.deadline);
    transport::WaitContext all = wait;
    all.links = activeLinks_;  // the new links too, kept moving by every wait
    if (rank_ != 0) {
      trace_->addClockOffset(pingRankZero(*linksByRank_[0], all));
      return;
    }
    for (int peer = 1; peer < size_; ++peer) answerPings(*linksByRank_[peer], all);
    // The reference, exactly.
    trace_->addClockOffset({.atNs = nanoseconds(transport::Clock::now())});
  };
}

void CommunicatorImpl::measureClockOffset() {
  if (trace_ == nullptr) return;
  if (size_ == 1) {
    trace_->addClockOffset({.atNs = nanoseconds(transport::Clock::now())});
    return;
  }
  runBlocking(OpHeader{.kind = OpKind::kClockOffset}, clockExchange());
  nextSeq_ = 0;  // the caller's calls are numbered from 0, as without tracing
}

void CommunicatorImpl::measureClockOffsetAgain(bool async) {
  OpHeader header{.kind = OpKind::kClockOffset};
  if (async) {
    // After the queued call, in order; a failure fails the calls after it too, the caller's
    // own included (the communicator is then unusable).
    runAsync(header, clockExchange(), nullptr);
    return;
  }
  try {
    runBlocking(header, clockExchange());
  } catch (const std::exception& e) {
    // The caller's call succeeded; its next one reports what broke the communicator.
    log::warn("trace: the clock exchange after call #{} failed: {}", header.seq - 1, e.what());
  }
}

}  // namespace ringlet::detail
