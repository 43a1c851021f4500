#include "src/trace.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "ringlet/error.h"
#include "src/log.h"

namespace ringlet::trace {
namespace {

int64_t nanoseconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A JSON string's body: quotes, backslashes and control characters escaped.
std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

std::string fileFor(std::string path, int rank) {
  const size_t at = path.find("{rank}");
  if (at == std::string::npos) return fmt::format("{}.rank{}.json", path, rank);
  return path.replace(at, 6, std::to_string(rank));
}

// Microseconds with nanosecond digits, as the trace-event format counts time.
std::string micros(int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

}  // namespace

ClockOffset estimateClockOffset(std::span<const ClockSample> samples) {
  if (samples.empty()) throw InvalidArgument("estimateClockOffset: no samples");
  const ClockSample* best = nullptr;
  for (const ClockSample& s : samples) {
    if (s.receivedNs < s.sentNs) {
      throw InvalidArgument(
          fmt::format("estimateClockOffset: an answer received at {} ns before its ping left at {} "
                      "ns",
                      s.receivedNs, s.sentNs));
    }
    if (best == nullptr || s.receivedNs - s.sentNs < best->receivedNs - best->sentNs) best = &s;
  }
  const int64_t roundTrip = best->receivedNs - best->sentNs;
  return {.offsetNs = best->rank0Ns - (best->sentNs + roundTrip / 2),
          .uncertaintyNs = (roundTrip + 1) / 2,  // rounded up: a bound
          .samples = static_cast<int>(samples.size()),
          .atNs = best->sentNs + roundTrip / 2};
}

Recorder::Recorder(std::string path, int rank, int size, std::string host)
    : path_(fileFor(std::move(path), rank)), rank_(rank), size_(size), host_(std::move(host)) {}

Recorder::~Recorder() {
  try {
    write();
  } catch (const std::exception& e) {
    log::warn("{}", e.what());
  }
}

bool Recorder::full() {
  if (events_ < kMaxEvents) return false;
  ++dropped_;
  return true;
}

void Recorder::collective(const char* name, std::string_view algorithm, uint64_t seq,
                          uint64_t bytes, Clock::time_point start, Clock::time_point end) {
  if (full()) return;
  Event e;
  e.step.name = name;
  e.algorithm = algorithm;
  e.seq = seq;
  e.call = currentCall_ - 1;
  e.step.bytes = bytes;
  e.startNs = nanoseconds(start);
  e.endNs = nanoseconds(end);
  e.isCollective = true;
  append(e);
}

void Recorder::step(const Step& step, Clock::time_point start, Clock::time_point end) {
  if (full()) return;
  Event e;
  e.step = step;
  e.seq = currentSeq_;
  e.call = currentCall_ - 1;
  e.startNs = nanoseconds(start);
  e.endNs = nanoseconds(end);
  append(e);
}

void Recorder::pointToPoint(const char* name, int to, int from, uint64_t seq, uint64_t bytes,
                            Clock::time_point start, Clock::time_point end) {
  if (full()) return;
  Event e;
  e.step.name = name;
  e.step.to = to;
  e.step.from = from;
  e.step.bytes = bytes;
  e.seq = seq;
  e.startNs = nanoseconds(start);
  e.endNs = nanoseconds(end);
  e.isPointToPoint = true;
  append(e);
}

void Recorder::append(const Event& e) {
  if (events_ % kChunkEvents == 0) chunks_.push_back(std::make_unique<Event[]>(kChunkEvents));
  chunks_.back()[events_ % kChunkEvents] = e;
  ++events_;
}

void Recorder::write() {
  if (written_) return;
  written_ = true;
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path_.c_str(), "w"), &std::fclose);
  if (!file) {
    throw IoError(
        fmt::format("RINGLET_TRACE: cannot write the trace of rank {} to {}", rank_, path_));
  }
  // Where this rank's steady clock stood against the wall clock, for merging across hosts.
  const int64_t steadyNs = nanoseconds(Clock::now());
  const int64_t systemNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  FILE* f = file.get();
  fmt::print(f, "{{\"traceEvents\":[\n");
  fmt::print(f,
             "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
             "\"args\":{{\"name\":\"rank {0}\"}}}},\n"
             "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
             "\"args\":{{\"sort_index\":{0}}}}},\n"
             "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
             "\"args\":{{\"name\":\"collectives\"}}}},\n"
             "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":1,"
             "\"args\":{{\"name\":\"steps\"}}}},\n"
             "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":2,"
             "\"args\":{{\"name\":\"point-to-point\"}}}}",
             rank_);
  for (size_t i = 0; i < events_; ++i) {
    const Event& e = chunks_[i / kChunkEvents][i % kChunkEvents];
    const std::string ts = micros(e.startNs);
    const std::string dur = micros(std::max<int64_t>(e.endNs - e.startNs, 0));
    if (e.isCollective) {
      fmt::print(f,
                 ",\n{{\"name\":\"{}\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":{},\"tid\":0,"
                 "\"ts\":{},\"dur\":{},\"args\":{{\"call\":{},\"seq\":{},\"algorithm\":\"{}\","
                 "\"bytes\":{}}}}}",
                 escaped(e.step.name), rank_, ts, dur, e.call, e.seq, escaped(e.algorithm),
                 e.step.bytes);
      continue;
    }
    if (e.isPointToPoint) {
      fmt::print(
          f,
          ",\n{{\"name\":\"{}\",\"cat\":\"p2p\",\"ph\":\"X\",\"pid\":{},\"tid\":2,"
          "\"ts\":{},\"dur\":{},\"args\":{{\"seq\":{},\"to\":{},\"from\":{},\"bytes\":{}}}}}",
          e.step.name, rank_, ts, dur, e.seq, e.step.to, e.step.from, e.step.bytes);
      continue;
    }
    const Step& s = e.step;
    fmt::print(f,
               ",\n{{\"name\":\"{}\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":{},\"tid\":1,"
               "\"ts\":{},\"dur\":{},\"args\":{{\"call\":{},\"seq\":{},\"chunk\":{},\"slice\":{},"
               "\"to\":{},"
               "\"from\":{},\"offset\":{},\"bytes\":{},\"reduces\":{}}}}}",
               s.name, rank_, ts, dur, e.call, e.seq, s.chunk, s.slice, s.to, s.from, s.offset,
               s.bytes, s.reduces);
  }
  fmt::print(f,
             "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\"ringlet_trace\":1,\"rank\":{},"
             "\"size\":{},\"host\":\"{}\",\"clock\":\"steady\",\"steady_ns\":{},\"system_ns\":{},"
             "\"dropped\":{}",
             rank_, size_, escaped(host_), steadyNs, systemNs, dropped_);
  if (!clockOffsets_.empty()) {
    // Rank 0's steady time = this rank's + the offset (the clock exchange at creation).
    const ClockOffset& first = clockOffsets_.front();
    fmt::print(f,
               ",\"clock_offset_to_rank0_ns\":{},\"clock_offset_uncertainty_ns\":{},"
               "\"clock_offset_samples\":{},\"clock_offsets\":[",
               first.offsetNs, first.uncertaintyNs, first.samples);
    for (size_t i = 0; i < clockOffsets_.size(); ++i) {
      const ClockOffset& o = clockOffsets_[i];
      fmt::print(f, "{}{{\"at_ns\":{},\"offset_ns\":{},\"uncertainty_ns\":{},\"samples\":{}}}",
                 i == 0 ? "" : ",", o.atNs, o.offsetNs, o.uncertaintyNs, o.samples);
    }
    fmt::print(f, "]");
  }
  fmt::print(f, "}}}}\n");
  if (std::fflush(f) != 0 || std::ferror(f)) {
    throw IoError(
        fmt::format("RINGLET_TRACE: writing the trace of rank {} to {} failed", rank_, path_));
  }
}

}  // namespace ringlet::trace
