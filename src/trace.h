#pragma once
// Trace mode (RINGLET_TRACE=path): every collective a communicator runs, and inside it every step
// of its schedule (which chunk goes to whom, comes from whom, is reduced), with bytes and
// timestamps, and every point-to-point call (send, recv, sendrecv: peers and bytes), written as a
// Chrome trace-event JSON file per rank (opens in Perfetto and chrome://tracing; `ringlet-trace
// merge` joins the ranks' files, `ringlet-trace plot` draws them).
//
// The communicator owns one Recorder when tracing is on and hands it to the algorithms in
// transport::WaitContext::trace; off, that pointer is null and a step costs one test of it.
// Events stay in memory (at most kMaxEvents; later ones are counted as dropped) and are written
// when the Recorder is destroyed. One Recorder is used by one thread at a time (the
// communicator's execution lock).
//
// Times are this rank's steady (monotonic) clock, which the ranks of one host share. For ranks
// on other hosts, creation ends (with tracing on only) with a clock exchange with rank 0
// (src/core/clock_offset.cc): 32 ping-pongs, the one with the shortest round trip giving this
// rank's offset to rank 0's clock within half that round trip (estimateClockOffset). The file's
// otherData carries it (clock_offset_to_rank0_ns, clock_offset_uncertainty_ns,
// clock_offset_samples; rank 0: 0, 0, 0), and `ringlet-trace merge` moves each other host's ranks
// by it. The exchange is a collective call: every rank of a communicator traces, or none. It runs
// again after calls 2^10 - 1, 2^11 - 1, ... (each rank decides alike from the calls' numbers; the
// exchange takes the next number), so that a long run has a measurement at least halfway
// through it: clock_offsets lists them all, each with the time on this rank's clock at which it
// holds, and merge draws each host's line through them (clocks that drift apart).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringlet::trace {

using Clock = std::chrono::steady_clock;

// One step of a schedule: a primitive (link_prims.h) or an exchange of the log-step algorithms.
struct Step {
  const char* name = "";  // "send", "recvReduceSend", ..., "exchange"; a string literal
  int to = -1;            // the rank sent to, -1 none
  int from = -1;          // the rank received from, -1 none
  int chunk = -1;         // the ring chunk (0..N-1), -1 where the algorithm has none
  int64_t slice = -1;     // the pipeline slice within the chunk, -1 where none
  uint64_t offset = 0;    // where the piece starts in the buffer, bytes
  uint64_t bytes = 0;     // bytes sent (or received, when nothing is sent)
  bool reduces = false;   // whether the step reduces what it receives
};

// One ping-pong of the clock exchange: this rank's steady clock when its ping left and when the
// answer came back, and rank 0's steady clock when it answered (nanoseconds since each clock's
// epoch).
struct ClockSample {
  int64_t sentNs = 0;
  int64_t rank0Ns = 0;
  int64_t receivedNs = 0;
};

// Where this rank's steady clock stands against rank 0's: rank 0's time = this rank's + offsetNs.
struct ClockOffset {
  int64_t offsetNs = 0;
  // The true offset lies within offsetNs +- uncertaintyNs (half the round trip it came from).
  int64_t uncertaintyNs = 0;
  int samples = 0;   // ping-pongs it was chosen from (0 on rank 0, the reference)
  int64_t atNs = 0;  // this rank's steady time at which it holds (the middle of that ping-pong)
};

// Cristian's estimate from the sample with the shortest round trip: rank 0 read its clock at some
// moment between sentNs and receivedNs of this rank's clock, so offset = rank0Ns - (sentNs +
// receivedNs) / 2, wrong by at most half the round trip however unequal the two directions'
// delays were; atNs is that middle. Pure; throws InvalidArgument when `samples` is empty or a
// sample's answer came back before its ping left.
ClockOffset estimateClockOffset(std::span<const ClockSample> samples);

class Recorder {
 public:
  static constexpr size_t kMaxEvents = size_t{1} << 22;

  // Events go to `path` with "{rank}" replaced by the rank, or to `path` + ".rank<r>.json" when
  // it has no "{rank}". `host` names the machine, so that a merge knows which clocks agree.
  Recorder(std::string path, int rank, int size, std::string host);
  ~Recorder();  // writes the file; an error is logged, never thrown
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // A call starts: the steps until collective() belong to it. Calls are numbered in the file
  // ("call": 0, 1, ...) apart from their sequence numbers, which restart after the cost model's
  // measurement inside create().
  void beginCall(uint64_t seq) {
    currentSeq_ = seq;
    ++currentCall_;
  }
  // A whole call: "allreduce", its algorithm ("ring") and sequence number. Both names are
  // string literals (kept as pointers until write()).
  void collective(const char* name, std::string_view algorithm, uint64_t seq, uint64_t bytes,
                  Clock::time_point start, Clock::time_point end);
  void step(const Step& step, Clock::time_point start, Clock::time_point end);
  // A point-to-point call ("send", "recv", "sendrecv"; a string literal): the rank it sent to
  // and the one it received from (-1: none), its per-pair sequence number, the bytes sent and
  // received. Not a call in the collectives' numbering (other ranks need not make it).
  void pointToPoint(const char* name, int to, int from, uint64_t seq, uint64_t bytes,
                    Clock::time_point start, Clock::time_point end);

  // A clock exchange's result, written to the file's otherData (none is written without one):
  // the first as clock_offset_to_rank0_ns and the rest, all of them in clock_offsets.
  void addClockOffset(const ClockOffset& offset) { clockOffsets_.push_back(offset); }

  // Writes everything recorded so far (the destructor calls it); throws IoError naming the file.
  void write();
  const std::string& path() const { return path_; }

 private:
  struct Event {
    Step step;  // collectives: step.name is the call's name
    std::string_view algorithm;
    uint64_t seq = 0;
    uint64_t call = 0;
    int64_t startNs = 0;
    int64_t endNs = 0;
    bool isCollective = false;
    bool isPointToPoint = false;
  };
  bool full();
  // Appends without ever moving what is stored: a growing vector would copy every event now and
  // then, in the middle of some call.
  void append(const Event& e);

  std::string path_;
  int rank_;
  int size_;
  std::string host_;
  static constexpr size_t kChunkEvents = 8192;
  std::vector<std::unique_ptr<Event[]>> chunks_;
  size_t events_ = 0;
  uint64_t dropped_ = 0;
  uint64_t currentSeq_ = 0;
  uint64_t currentCall_ = 0;               // 1 + the index of the call running
  std::vector<ClockOffset> clockOffsets_;  // in the order measured
  bool written_ = false;
};

// Records one step from construction to destruction when `recorder` is not null; `describe`
// (returning a Step) runs only then, so a step costs one test when tracing is off.
class StepScope {
 public:
  template <typename Describe>
  StepScope(Recorder* recorder, Describe&& describe) : recorder_(recorder) {
    if (recorder_ != nullptr) {
      step_ = describe();
      start_ = Clock::now();
    }
  }
  ~StepScope() {
    if (recorder_ != nullptr) recorder_->step(step_, start_, Clock::now());
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Recorder* recorder_;
  Step step_;
  Clock::time_point start_;
};

}  // namespace ringlet::trace
