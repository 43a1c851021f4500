// Trace mode's clock exchange (src/core/clock_offset.cc): the estimator on synthetic samples with
// a known skew and unequal delays, then real runs on one host, whose ranks share a clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "src/trace.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using trace::ClockOffset;
using trace::ClockSample;
using trace::estimateClockOffset;

constexpr int64_t kUs = 1000;
constexpr int64_t kSkew = 3'700'000'000;  // rank 0's clock 3.7 s ahead of this rank's

// One ping-pong as it would happen: the ping takes `up` to reach rank 0, which reads its clock
// (`skew` ahead of this rank's) and answers; the answer takes `down` to come back.
ClockSample exchange(int64_t sent, int64_t up, int64_t down, int64_t skew) {
  return {.sentNs = sent, .rank0Ns = sent + up + skew, .receivedNs = sent + up + down};
}

TEST(TraceClock, TheShortestRoundTripGivesTheOffsetWithinHalfOfIt) {
  for (int64_t skew : {kSkew, -kSkew, int64_t{0}}) {
    // Asymmetric delays throughout; the third has the shortest round trip (5 + 3 us).
    const std::vector<ClockSample> samples = {
        exchange(1'000'000'000, 50 * kUs, 10 * kUs, skew),
        exchange(1'001'000'000, 8 * kUs, 30 * kUs, skew),
        exchange(1'002'000'000, 5 * kUs, 3 * kUs, skew),
        exchange(1'003'000'000, 100 * kUs, 1 * kUs, skew),
        exchange(1'004'000'000, 2 * kUs, 9 * kUs, skew),
    };
    const ClockOffset o = estimateClockOffset(samples);
    // Its ping took 1 us longer than its answer: the estimate is off by half of that.
    EXPECT_EQ(o.offsetNs, skew + 1 * kUs) << "skew " << skew;
    EXPECT_EQ(o.uncertaintyNs, 4 * kUs);
    EXPECT_EQ(o.samples, 5);
    EXPECT_LE(std::llabs(o.offsetNs - skew), o.uncertaintyNs);
  }
}

TEST(TraceClock, TheBoundHoldsHoweverUnequalTheDelays) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 1000; ++trial) {
    const int64_t skew = static_cast<int64_t>(random() % 20'000'000'000) - 10'000'000'000;
    std::vector<ClockSample> samples;
    int64_t shortest = INT64_MAX;
    const int count = 1 + static_cast<int>(random() % 32);
    for (int i = 0; i < count; ++i) {
      // One direction often much slower than the other; odd nanoseconds included.
      const int64_t up = static_cast<int64_t>(random() % (random() % 2 ? 1'000'000 : 1'000));
      const int64_t down = static_cast<int64_t>(random() % (random() % 2 ? 1'000'000 : 1'000));
      samples.push_back(exchange(1'000'000 * (i + 1), up, down, skew));
      shortest = std::min(shortest, up + down);
    }
    const ClockOffset o = estimateClockOffset(samples);
    EXPECT_EQ(o.uncertaintyNs, (shortest + 1) / 2) << "trial " << trial;
    EXPECT_LE(std::llabs(o.offsetNs - skew), o.uncertaintyNs) << "trial " << trial;
    EXPECT_EQ(o.samples, count);
  }
}

TEST(TraceClock, NoSamplesOrAnAnswerBeforeItsPingIsAnError) {
  EXPECT_THROW(estimateClockOffset({}), InvalidArgument);
  const std::vector<ClockSample> backwards = {{.sentNs = 10, .rank0Ns = 5, .receivedNs = 9}};
  EXPECT_THROW(estimateClockOffset(backwards), InvalidArgument);
}

json readTrace(const std::string& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "no trace file " << file;
  return json::parse(in);
}

CommunicatorOptions traced(const std::string& path, const std::string& transport) {
  CommunicatorOptions o;
  o.timeout = 20s;
  o.transport = transport;
  o.trace = path;
  return o;
}

// Rank 0's file says 0 exactly; the others an offset to rank 0 from every sample. On one host the
// true offset is 0 (one monotonic clock), so the estimate lies within its uncertainty of 0.
void expectOneHostOffsets(const std::string& prefix, int n) {
  for (int r = 0; r < n; ++r) {
    const json other = readTrace(prefix + ".rank" + std::to_string(r) + ".json")["otherData"];
    ASSERT_TRUE(other.contains("clock_offset_to_rank0_ns")) << other.dump();
    const int64_t offset = other["clock_offset_to_rank0_ns"];
    const int64_t uncertainty = other["clock_offset_uncertainty_ns"];
    if (r == 0) {
      EXPECT_EQ(offset, 0);
      EXPECT_EQ(uncertainty, 0);
      EXPECT_EQ(other["clock_offset_samples"], 0);
      continue;
    }
    EXPECT_LT(std::llabs(offset), 5'000'000) << prefix << " rank " << r;
    EXPECT_GT(uncertainty, 0) << prefix << " rank " << r;
    EXPECT_LE(std::llabs(offset), uncertainty) << prefix << " rank " << r;
    EXPECT_EQ(other["clock_offset_samples"], 32) << prefix << " rank " << r;
    std::printf("%s rank %d: offset %lld ns +- %lld ns\n", prefix.c_str(), r,
                static_cast<long long>(offset), static_cast<long long>(uncertainty));
  }
}

TEST(TraceClock, ProcessRanksOfOneHostMeasureAboutNothing) {
  const std::string dir = makeTempDir("ringlet-trace-clock");
  for (const std::string transport : {"shm", "tcp"}) {
    const std::string prefix = dir + "/" + transport;
    runProcessRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm =
          Communicator::create(Bootstrap::forThread(rank, size, store), traced(prefix, transport));
      std::vector<float> a(1000, 1.0f);
      comm.allreduce(std::span(a), ReduceOp::kSum);
      EXPECT_EQ(a[0], 3.0f);
    });
    expectOneHostOffsets(prefix, 3);
  }
  std::filesystem::remove_all(dir);
}

// Six ranks: rank 0 has no link to rank 3 for the algorithms; the exchange makes one. The
// caller's first collective is still number 0, as without tracing, and the exchange is a call of
// its own in the file.
TEST(TraceClock, RankZeroLinksEveryRankAndTheCallersNumberingIsKept) {
  const std::string dir = makeTempDir("ringlet-trace-clock");
  runThreadRanks(6, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/t", "local"));
    std::vector<int32_t> a(100, rank);
    comm.allreduce(std::span(a), ReduceOp::kSum);
    EXPECT_EQ(a[0], 15);
  });
  expectOneHostOffsets(dir + "/t", 6);
  for (int r = 0; r < 6; ++r) {
    const json trace = readTrace(dir + "/t.rank" + std::to_string(r) + ".json");
    std::optional<uint64_t> exchangeCall, allreduceCall, allreduceSeq;
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") != "collective") continue;
      if (e["name"] == "clock_offset") exchangeCall = e["args"]["call"];
      if (e["name"] == "allreduce") {
        allreduceCall = e["args"]["call"];
        allreduceSeq = e["args"]["seq"];
      }
    }
    ASSERT_TRUE(exchangeCall && allreduceCall) << "rank " << r;
    EXPECT_LT(*exchangeCall, *allreduceCall) << "rank " << r;
    EXPECT_EQ(allreduceSeq, 0u) << "rank " << r;
  }
  std::filesystem::remove_all(dir);
}

// A sub-communicator measures against its own rank 0, for its own files.
TEST(TraceClock, SplitCommunicatorsMeasureAgainstTheirOwnRankZero) {
  const std::string dir = makeTempDir("ringlet-trace-clock");
  runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/t", "local"));
    std::optional<Communicator> half = comm.split(rank % 2, rank);
    ASSERT_TRUE(half.has_value());
    half->barrier();
  });
  expectOneHostOffsets(dir + "/t.split0-color0", 2);
  expectOneHostOffsets(dir + "/t.split0-color1", 2);
  std::filesystem::remove_all(dir);
}

// A long run exchanges again after call 1023 (and 2047, ...), blocking or queued: the file lists
// every measurement with the time it holds at, the exchange takes the next number, and the
// caller's calls around it are unharmed.
TEST(TraceClock, LongRunsMeasureAgainAfterCall1023) {
  for (const bool async : {false, true}) {
    const std::string dir = makeTempDir("ringlet-trace-clock");
    runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store),
                                               traced(dir + "/t", "local"));
      std::vector<int32_t> a(4);
      for (int call = 0; call < 1100; ++call) {
        std::fill(a.begin(), a.end(), rank + call);
        if (async && call >= 1000) {
          // Queued across the exchange: it runs after call 1023, in order.
          comm.allreduceAsync(a.data(), a.data(), a.size(), DataType::kInt32, ReduceOp::kSum)
              .wait();
        } else {
          comm.allreduce(std::span(a), ReduceOp::kSum);
        }
        ASSERT_EQ(a[0], 3 + 3 * call) << "call " << call;
      }
    });
    expectOneHostOffsets(dir + "/t", 3);
    for (int r = 0; r < 3; ++r) {
      const json trace = readTrace(dir + "/t.rank" + std::to_string(r) + ".json");
      const json& offsets = trace["otherData"]["clock_offsets"];
      ASSERT_EQ(offsets.size(), 2u) << offsets.dump();
      EXPECT_EQ(offsets[0]["offset_ns"], trace["otherData"]["clock_offset_to_rank0_ns"]);
      EXPECT_LT(offsets[0]["at_ns"].get<int64_t>(), offsets[1]["at_ns"].get<int64_t>());
      for (const json& o : offsets) {
        EXPECT_LE(std::llabs(o["offset_ns"].get<int64_t>()), o["uncertainty_ns"].get<int64_t>())
            << "rank " << r << ": " << o.dump();  // one host: one clock
        EXPECT_EQ(o["samples"], r == 0 ? 0 : 32);
      }
      std::vector<uint64_t> exchanges, allreduces;
      for (const json& e : trace["traceEvents"]) {
        if (e.value("cat", "") != "collective") continue;
        if (e["name"] == "clock_offset") exchanges.push_back(e["args"]["seq"]);
        if (e["name"] == "allreduce") allreduces.push_back(e["args"]["seq"]);
      }
      ASSERT_EQ(exchanges.size(), 2u) << "rank " << r;
      EXPECT_EQ(exchanges[1], 1024u) << "rank " << r;
      ASSERT_EQ(allreduces.size(), 1100u) << "rank " << r;
      EXPECT_EQ(allreduces[1023], 1023u);
      EXPECT_EQ(allreduces[1024], 1025u);  // the exchange took 1024
    }
    std::filesystem::remove_all(dir);
  }
}

// Two ranks' small broadcasts: the root sends and returns without an answer (read at a later
// call); the exchange after call 1023 follows such a call like any other.
TEST(TraceClock, TheExchangeFollowsUnansweredSmallCalls) {
  const std::string dir = makeTempDir("ringlet-trace-clock");
  for (const std::string transport : {"local", "shm", "tcp"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store),
                                               traced(dir + "/" + transport, transport));
      for (int call = 0; call < 1030; ++call) {
        int64_t value = rank == 0 ? call : -1;
        comm.broadcast(&value, 1, DataType::kInt64, 0);
        ASSERT_EQ(value, call) << transport << " call " << call;
      }
    });
    for (int r = 0; r < 2; ++r) {
      const json trace = readTrace(dir + "/" + transport + ".rank" + std::to_string(r) + ".json");
      EXPECT_EQ(trace["otherData"]["clock_offsets"].size(), 2u) << transport << " rank " << r;
    }
  }
  std::filesystem::remove_all(dir);
}

// The exchange is a collective: a rank that traces and one that does not disagree about the call
// after creation's calibration, and fail naming it rather than hang.
TEST(TraceClock, TracingOnSomeRanksOnlyFailsNamingTheExchange) {
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    const std::string dir = rank == 0 ? makeTempDir("ringlet-trace-clock") : "";
    try {
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store),
                                               traced(rank == 0 ? dir + "/t" : "", "local"));
      std::vector<float> a(10, 1.0f);
      comm.allreduce(std::span(a), ReduceOp::kSum);
      ADD_FAILURE() << "rank " << rank << " went on";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("clock"), std::string::npos) << e.what();
    }
    if (rank == 0) std::filesystem::remove_all(dir);
  });
}

}  // namespace
}  // namespace ringlet::testing
