// Trace mode (CommunicatorOptions::trace, RINGLET_TRACE): each rank's file is trace-event JSON
// whose steps follow the ring schedule of collectives/ring_schedule.h, chunk by chunk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

int wrap(int v, int n) { return ((v % n) + n) % n; }

CommunicatorOptions traced(const std::string& path) {
  CommunicatorOptions o;
  o.timeout = 10s;
  o.transport = "local";
  o.trace = path;
  o.algorithms = {{"allreduce", "ring"},
                  {"allgather", "ring"},
                  {"allgatherv", "ring"},
                  {"reducescatterv", "ring"}};
  o.segmentBytes = 64 << 10;  // 64 KiB slices
  return o;
}

json readTrace(const std::string& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "no trace file " << file;
  return json::parse(in);
}

// The steps (cat "step") of the collective whose name starts with `call`, in time order.
std::vector<json> stepsOf(const json& trace, const std::string& name) {
  const json* found = nullptr;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "collective" && e["name"].get<std::string>().rfind(name, 0) == 0) {
      found = &e;
    }
  }
  EXPECT_NE(found, nullptr) << "no " << name << " in the trace";
  if (found == nullptr) return {};
  const uint64_t call = (*found)["args"]["call"];
  std::vector<json> steps;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "step" && e["args"]["call"] == call) steps.push_back(e);
  }
  return steps;
}

TEST(Trace, RingAllreduceStepsFollowTheSchedule) {
  const std::string dir = makeTempDir("ringlet-trace");
  const int n = 4;
  // 4 chunks of 100000 floats: 7 slices of 64 KiB (the last one short) per chunk.
  const size_t count = 4 * 100000;
  runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/t.{rank}"));
    std::vector<float> data(count, float(rank + 1));
    comm.allreduce(std::span(data), ReduceOp::kSum);
    EXPECT_EQ(data[count - 1], 10.0f);
  });
  const size_t chunkBytes = count / n * sizeof(float);
  const size_t sliceBytes = 64 << 10;
  const size_t slices = (chunkBytes + sliceBytes - 1) / sliceBytes;
  for (int r = 0; r < n; ++r) {
    const json trace = readTrace(dir + "/t." + std::to_string(r));
    EXPECT_EQ(trace["otherData"]["rank"], r);
    EXPECT_EQ(trace["otherData"]["size"], n);
    const std::vector<json> steps = stepsOf(trace, "allreduce");
    ASSERT_EQ(steps.size(), slices * (2 * n - 1)) << "rank " << r;
    // Per slice: send chunk r; receive-reduce-send r-1, r-2; the final reduce of r+1; forward
    // r, r-1; receive r+2 (ring_schedule.h).
    const std::vector<std::string> names = {"send",
                                            "recvReduceSend",
                                            "recvReduceSend",
                                            "recvReduceCopySend",
                                            "recvCopySend",
                                            "recvCopySend",
                                            "recv"};
    const std::vector<int> chunks = {r, r - 1, r - 2, r + 1, r, r - 1, r + 2};
    uint64_t bytes = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const json& s = steps[i];
      const size_t k = i / names.size();
      const size_t at = i % names.size();
      EXPECT_EQ(s["name"], names[at]) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["chunk"], wrap(chunks[at], n)) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["slice"], k) << "rank " << r << " step " << i;
      EXPECT_EQ(s["args"]["to"], at == names.size() - 1 ? -1 : wrap(r + 1, n));
      EXPECT_EQ(s["args"]["from"], at == 0 ? -1 : wrap(r - 1, n));
      EXPECT_EQ(s["args"]["reduces"], at >= 1 && at <= 3);
      EXPECT_GE(s["dur"].get<double>(), 0.0);
      if (at > 0) bytes += s["args"]["bytes"].get<uint64_t>();
    }
    // Every rank receives 2(N-1) chunks: 2(N-1)/N of the buffer.
    EXPECT_EQ(bytes, 2 * (n - 1) * chunkBytes) << "rank " << r;
  }
  std::filesystem::remove_all(dir);
}

// The v-forms' steps name their block (as `chunk`) and its slice: with blocks of 40000, 0 and
// 20000 floats in 64 KiB slices, every rank receives the 3 + 2 slices of the blocks not its own,
// and nothing ever names the empty block.
TEST(Trace, VFormStepsNameTheirBlockAndSlice) {
  const std::string dir = makeTempDir("ringlet-trace");
  const int n = 3;
  const std::vector<size_t> counts = {40000, 0, 20000};
  const std::vector<size_t> slicesOf = {3, 0, 2};  // 160000 B and 80000 B in 65536 B slices
  runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/t.{rank}"));
    std::vector<float> send(counts[rank], float(rank + 1));
    std::vector<float> recv(60000);
    comm.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32);
    EXPECT_EQ(recv[0], 1.0f);
    EXPECT_EQ(recv[59999], 3.0f);
  });
  for (int r = 0; r < n; ++r) {
    const std::vector<json> steps =
        stepsOf(readTrace(dir + "/t." + std::to_string(r)), "allgatherv");
    std::set<std::pair<int, int64_t>> received;
    for (const json& s : steps) {
      const int block = s["args"]["chunk"];
      const int64_t slice = s["args"]["slice"];
      ASSERT_TRUE(block == 0 || block == 2) << "rank " << r << ": a step names block " << block;
      EXPECT_LT(slice, static_cast<int64_t>(slicesOf[block])) << "rank " << r;
      if (s["args"]["from"] != -1) received.insert({block, slice});
    }
    std::set<std::pair<int, int64_t>> expected;
    for (int b : {0, 2}) {
      for (size_t k = 0; k < slicesOf[b] && b != r; ++k) expected.insert({b, int64_t(k)});
    }
    EXPECT_EQ(received, expected) << "rank " << r;
  }
  std::filesystem::remove_all(dir);
}

// The log-step v-forms name their blocks too: a message that carries several blocks (or parts of
// several slices) records a step for each. Recursive doubling, N = 3 (rank 2 folds into rank 0):
// every rank receives every slice of the blocks not its own, and the folded rank its own as well
// (it gets the whole result back). Recursive halving: every step names a block that has elements
// and one of its slices, and each rank's own block arrives reduced: rank 0 gets blocks 0 and 2
// from rank 2 and from rank 1, rank 2 block 2 back from rank 0, rank 1 (whose block is empty)
// nothing.
TEST(Trace, LogStepVFormStepsNameTheirBlockAndSlice) {
  const std::string dir = makeTempDir("ringlet-trace");
  const int n = 3;
  const std::vector<size_t> counts = {40000, 0, 20000};
  const std::vector<size_t> slicesOf = {3, 0, 2};  // 160000 B and 80000 B in 65536 B slices
  runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = traced(dir + "/t.{rank}");
    o.algorithms = {{"allgatherv", "recursive_doubling"}, {"reducescatterv", "recursive_halving"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::vector<float> send(counts[rank], float(rank + 1));
    std::vector<float> recv(60000);
    comm.allgatherv(send.data(), recv.data(), counts, DataType::kFloat32);
    EXPECT_EQ(recv[0], 1.0f);
    EXPECT_EQ(recv[59999], 3.0f);
    std::vector<float> all(60000, float(rank + 1)), mine(counts[rank]);
    comm.reduceScatterv(all.data(), mine.data(), counts, DataType::kFloat32, ReduceOp::kSum);
    if (!mine.empty()) {
      EXPECT_EQ(mine.back(), 6.0f);
    }
  });
  const std::set<std::pair<int, int64_t>> none;
  const std::set<std::pair<int, int64_t>> both = {{0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1}};
  const std::vector<std::set<std::pair<int, int64_t>>> reducedInto = {both, none, {{2, 0}, {2, 1}}};
  for (int r = 0; r < n; ++r) {
    const json trace = readTrace(dir + "/t." + std::to_string(r));
    for (const char* call : {"allgatherv", "reduce_scatterv"}) {
      const bool gather = std::string(call) == "allgatherv";
      std::set<std::pair<int, int64_t>> received;
      for (const json& s : stepsOf(trace, call)) {
        const int block = s["args"]["chunk"];
        const int64_t slice = s["args"]["slice"];
        ASSERT_TRUE(block == 0 || block == 2) << call << " rank " << r << ": names block " << block;
        EXPECT_LT(slice, static_cast<int64_t>(slicesOf[block])) << call << " rank " << r;
        EXPECT_GE(slice, 0) << call << " rank " << r;
        if (s["args"]["from"] != -1) received.insert({block, slice});
      }
      std::set<std::pair<int, int64_t>> expected;
      for (int b : {0, 2}) {
        for (size_t k = 0; k < slicesOf[b] && (b != r || r == 2); ++k) {
          expected.insert({b, int64_t(k)});
        }
      }
      EXPECT_EQ(received, gather ? expected : reducedInto[r]) << call << " rank " << r;
    }
  }
  std::filesystem::remove_all(dir);
}

// A call that moves no data runs no algorithm (its header goes to the next rank and it returns):
// the trace names none, whichever one the model or the caller would have picked for it.
TEST(Trace, ACallThatMovesNoDataNamesNoAlgorithm) {
  const std::string dir = makeTempDir("ringlet-trace");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = traced(dir + "/empty");
    o.algorithms = {{"allreduce", "ring"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(comm.algorithmFor("allreduce", 0), "none");  // what the trace shows below
    std::vector<int32_t> a(4, rank);
    comm.allreduce(a.data(), a.data(), 0, DataType::kInt32, ReduceOp::kSum);
    comm.allreduce(std::span(a), ReduceOp::kSum);
  });
  for (int r = 0; r < 3; ++r) {
    const json trace = readTrace(dir + "/empty.rank" + std::to_string(r) + ".json");
    std::vector<std::string> algorithms;
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") != "collective") continue;
      if (e["name"].get<std::string>().rfind("allreduce", 0) != 0) continue;
      algorithms.push_back(e["args"]["algorithm"].get<std::string>());
    }
    EXPECT_EQ(algorithms, (std::vector<std::string>{"none", "ring"})) << "rank " << r;
  }
  std::filesystem::remove_all(dir);
}

// algorithmFor(c, 0) names "none" exactly for the zero-count calls that run none (the trace's
// word for what ran): its list of collectives and the core's (movesNoData) must agree.
TEST(Trace, AlgorithmForNamesNoneForTheZeroCountCallsThatRunNone) {
  const std::string dir = makeTempDir("ringlet-trace");
  // algorithmFor's name, the trace's, and the zero-count call.
  struct Case {
    const char* collective;
    const char* traced;
    std::function<void(Communicator&, int32_t*)> call;
  };
  const std::vector<size_t> zeros(3, 0);
  const std::vector<Case> cases = {
      {"allreduce", "allreduce",
       [](Communicator& c, int32_t* a) { c.allreduce(a, a, 0, DataType::kInt32, ReduceOp::kSum); }},
      {"allgather", "allgather",
       [](Communicator& c, int32_t* a) { c.allgather(a, a + 4, 0, DataType::kInt32); }},
      {"reducescatter", "reduce_scatter",
       [](Communicator& c, int32_t* a) {
         c.reduceScatter(a, a + 4, 0, DataType::kInt32, ReduceOp::kSum);
       }},
      {"alltoall", "alltoall",
       [](Communicator& c, int32_t* a) { c.allToAll(a, a + 4, 0, DataType::kInt32); }},
      {"allgatherv", "allgatherv",
       [&](Communicator& c, int32_t* a) { c.allgatherv(a, a + 4, zeros, DataType::kInt32); }},
      {"reducescatterv", "reduce_scatterv",
       [&](Communicator& c, int32_t* a) {
         c.reduceScatterv(a, a + 4, zeros, DataType::kInt32, ReduceOp::kSum);
       }},
      {"broadcast", "broadcast",
       [](Communicator& c, int32_t* a) { c.broadcast(a, 0, DataType::kInt32, 0); }},
      {"reduce", "reduce",
       [](Communicator& c, int32_t* a) {
         c.reduce(a, a + 4, 0, DataType::kInt32, ReduceOp::kSum, 0);
       }},
      {"gather", "gather",
       [](Communicator& c, int32_t* a) { c.gather(a, a + 4, 0, DataType::kInt32, 0); }},
      {"scatter", "scatter",
       [](Communicator& c, int32_t* a) { c.scatter(a, a + 4, 0, DataType::kInt32, 0); }},
  };
  std::vector<std::string> said(cases.size());
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/zero"));
    std::vector<int32_t> a(8, rank);
    for (size_t i = 0; i < cases.size(); ++i) {
      if (rank == 0) said[i] = comm.algorithmFor(cases[i].collective, 0);
      cases[i].call(comm, a.data());
    }
    comm.barrier();
  });
  const json trace = readTrace(dir + "/zero.rank0.json");
  std::map<std::string, std::string> ran;  // traced name -> algorithm
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "collective") continue;
    ran[e["name"].get<std::string>()] = e["args"]["algorithm"].get<std::string>();
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto it = ran.find(cases[i].traced);
    ASSERT_NE(it, ran.end()) << cases[i].traced << " not in the trace";
    const std::string& ranAs = it->second;
    EXPECT_EQ(said[i] == "none", ranAs == "none")
        << cases[i].collective << ": algorithmFor says " << said[i] << ", the call ran " << ranAs;
  }
  std::filesystem::remove_all(dir);
}

TEST(Trace, EveryCallIsRecordedWithItsAlgorithmAndStepsInsideIt) {
  const std::string dir = makeTempDir("ringlet-trace");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = traced(dir + "/calls");
    o.algorithms = {{"allreduce", "recursive_doubling"}, {"allgather", "ring"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::vector<int32_t> a(1000, rank), g(3 * 1000);
    comm.allreduce(std::span(a), ReduceOp::kSum);
    comm.allgather(a.data(), g.data(), a.size(), DataType::kInt32);
    comm.broadcast(std::span(a), 1);
    comm.barrier();
  });
  for (int r = 0; r < 3; ++r) {
    const json trace = readTrace(dir + "/calls.rank" + std::to_string(r) + ".json");
    std::vector<std::string> calls;
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") != "collective") continue;
      calls.push_back(
          e["name"].get<std::string>().substr(0, e["name"].get<std::string>().find('(')));
      if (calls.back() == "allreduce") {
        EXPECT_EQ(e["args"]["algorithm"], "recursive_doubling");
      }
      if (calls.back() == "allgather") {
        EXPECT_EQ(e["args"]["algorithm"], "ring");
        EXPECT_EQ(e["args"]["bytes"], 1000 * sizeof(int32_t));
      }
      // Each step of a call lies inside it on this rank's clock.
      for (const json& s : stepsOf(trace, calls.back())) {
        EXPECT_GE(s["ts"].get<double>(), e["ts"].get<double>() - 1e-3);
        EXPECT_LE(s["ts"].get<double>() + s["dur"].get<double>(),
                  e["ts"].get<double>() + e["dur"].get<double>() + 1e-3);
      }
    }
    // The cost model's measurement at creation comes first; then the caller's calls in order.
    const std::vector<std::string> expected = {"allreduce", "allgather", "broadcast", "barrier"};
    ASSERT_GE(calls.size(), expected.size());
    EXPECT_EQ(std::vector<std::string>(calls.end() - 4, calls.end()), expected);
    // Recursive doubling over 3 ranks: its exchanges are steps too; so is the barrier's round at
    // distance 2 (the header exchange is its first).
    EXPECT_FALSE(stepsOf(trace, "allreduce").empty());
    const std::vector<json> barrier = stepsOf(trace, "barrier");
    ASSERT_EQ(barrier.size(), 1u);
    EXPECT_EQ(barrier[0]["args"]["to"], wrap(r + 2, 3));
    EXPECT_EQ(barrier[0]["args"]["from"], wrap(r - 2, 3));
  }
  std::filesystem::remove_all(dir);
}

// All-to-all: every peer's block is a step, sent to it and taken from it (the pairwise steps'
// exchanges in-process; over shared memory the blocks lent at once and taken as they come).
TEST(Trace, AllToAllStepsNameEveryPeer) {
  for (const std::string transport : {"local", "shm"}) {
    const std::string dir = makeTempDir("ringlet-trace");
    constexpr int kRanks = 4;
    constexpr size_t kBlock = 10000;  // int32 elements: 40 KB, one lent message over shm
    runThreadRanks(kRanks, [&](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o = traced(dir + "/a2a");
      o.transport = transport;
      o.algorithms = {{"alltoall", "pairwise"}};  // (auto may choose Bruck's rounds)
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      std::vector<int32_t> send(kRanks * kBlock), recv(kRanks * kBlock);
      for (size_t i = 0; i < send.size(); ++i) send[i] = rank * 1000 + static_cast<int>(i / kBlock);
      comm.allToAll(send.data(), recv.data(), kBlock, DataType::kInt32);
      for (int from = 0; from < kRanks; ++from) {
        EXPECT_EQ(recv[from * kBlock], from * 1000 + rank) << transport;
      }
    });
    for (int r = 0; r < kRanks; ++r) {
      const json trace = readTrace(dir + "/a2a.rank" + std::to_string(r) + ".json");
      std::set<int> to, from;
      std::set<std::string> names;
      for (const json& s : stepsOf(trace, "alltoall")) {
        names.insert(s["name"].get<std::string>());
        const int t = s["args"]["to"], f = s["args"]["from"];
        if (t >= 0) to.insert(t);
        if (f >= 0) from.insert(f);
        EXPECT_EQ(s["args"]["bytes"], kBlock * sizeof(int32_t)) << transport;
      }
      std::set<int> others;
      for (int p = 0; p < kRanks; ++p) {
        if (p != r) others.insert(p);
      }
      EXPECT_EQ(to, others) << transport << " rank " << r;
      EXPECT_EQ(from, others) << transport << " rank " << r;
      const std::set<std::string> expected = transport == "shm"
                                                 ? std::set<std::string>{"send", "recv"}
                                                 : std::set<std::string>{"exchange"};
      EXPECT_EQ(names, expected) << transport;
    }
    std::filesystem::remove_all(dir);
  }
}

// The linear scatter's root over shared memory lends every rank its block at once: a send step
// to each, ending when that rank has read it.
TEST(Trace, LinearScatterRootSendsToEveryRank) {
  const std::string dir = makeTempDir("ringlet-trace");
  constexpr int kRanks = 4;
  constexpr size_t kBlock = 10000;
  runThreadRanks(kRanks, [&](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = traced(dir + "/scatter");
    o.transport = "shm";
    o.algorithms = {{"scatter", "linear"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::vector<int32_t> send(kRanks * kBlock), recv(kBlock);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int>(i / kBlock);
    comm.scatter(send.data(), recv.data(), kBlock, DataType::kInt32, 0);
    EXPECT_EQ(recv[0], rank);
  });
  const json trace = readTrace(dir + "/scatter.rank0.json");
  std::set<int> to;
  for (const json& s : stepsOf(trace, "scatter")) {
    EXPECT_EQ(s["name"], "send");
    EXPECT_EQ(s["args"]["bytes"], kBlock * sizeof(int32_t));
    to.insert(s["args"]["to"].get<int>());
  }
  EXPECT_EQ(to, (std::set<int>{1, 2, 3}));
  std::filesystem::remove_all(dir);
}

// Point-to-point calls are recorded apart ("p2p", with their peers and bytes), and do not shift
// the numbering of the collectives that every rank shares.
TEST(Trace, PointToPointCallsAreRecordedWithTheirPeers) {
  const std::string dir = makeTempDir("ringlet-trace");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/p2p"));
    std::vector<float> out(1000, 1.0f), in(1000), back(500);
    if (rank == 0) comm.send(out.data(), 1000, DataType::kFloat32, 1, 5);
    if (rank == 1) comm.recv(in.data(), 1000, DataType::kFloat32, 0, 5);
    // Rank 1 sends 500 and receives 250, rank 2 the other way round.
    if (rank > 0) {
      const size_t sent = rank == 1 ? 500 : 250;
      comm.sendrecv(out.data(), sent, 3 - rank, back.data(), 750 - sent, 3 - rank,
                    DataType::kFloat32);
    }
    // A recv from any source shows whom it took from; a look that found nothing shows nothing.
    if (rank == 2) comm.send(out.data(), 10, DataType::kFloat32, 0, 6);
    if (rank == 0) {
      EXPECT_EQ(comm.tryRecv(in.data(), 10, DataType::kFloat32, kAnySource, 99), std::nullopt);
      EXPECT_EQ(comm.recv(in.data(), 10, DataType::kFloat32, kAnySource, 6), 2);
    }
    comm.allreduce(std::span(out), ReduceOp::kSum);
  });
  std::vector<uint64_t> allreduceCalls;
  for (int r = 0; r < 3; ++r) {
    const json trace = readTrace(dir + "/p2p.rank" + std::to_string(r) + ".json");
    std::vector<json> p2p;
    for (const json& e : trace["traceEvents"]) {
      if (e.value("cat", "") == "p2p") p2p.push_back(e);
      if (e.value("cat", "") == "collective" &&
          e["name"].get<std::string>().rfind("allreduce", 0) == 0) {
        allreduceCalls.push_back(e["args"]["call"]);
      }
    }
    std::vector<std::string> names;
    for (const json& e : p2p) names.push_back(e["name"]);
    if (r == 0) {
      ASSERT_EQ(names, (std::vector<std::string>{"send", "recv"}));
      EXPECT_EQ(p2p[0]["args"]["to"], 1);
      EXPECT_EQ(p2p[0]["args"]["from"], -1);
      EXPECT_EQ(p2p[0]["args"]["bytes"], 4000);
      EXPECT_EQ(p2p[0]["tid"], 2);
      EXPECT_EQ(p2p[1]["args"]["from"], 2);
      EXPECT_EQ(p2p[1]["args"]["bytes"], 40);
    } else if (r == 1) {
      ASSERT_EQ(names, (std::vector<std::string>{"recv", "sendrecv"}));
      EXPECT_EQ(p2p[0]["args"]["from"], 0);
      EXPECT_EQ(p2p[0]["args"]["to"], -1);
      EXPECT_EQ(p2p[1]["args"]["to"], 2);
      EXPECT_EQ(p2p[1]["args"]["from"], 2);
      EXPECT_EQ(p2p[1]["args"]["bytes"], (500 + 250) * 4);
    } else {
      ASSERT_EQ(names, (std::vector<std::string>{"sendrecv", "send"}));
      EXPECT_EQ(p2p[0]["args"]["to"], 1);
      EXPECT_EQ(p2p[0]["args"]["from"], 1);
    }
  }
  ASSERT_EQ(allreduceCalls.size(), 3u);
  EXPECT_EQ(allreduceCalls[0], allreduceCalls[1]);
  EXPECT_EQ(allreduceCalls[0], allreduceCalls[2]);
  std::filesystem::remove_all(dir);
}

// A sub-communicator (split, dup) traces into files of its own: its ranks are numbered anew, so
// sharing the parent's path would overwrite the parent's files.
TEST(Trace, SubCommunicatorsWriteFilesOfTheirOwn) {
  const std::string dir = makeTempDir("ringlet-trace");
  runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), traced(dir + "/sub"));
    std::vector<int32_t> a(100, rank);
    comm.allreduce(std::span(a), ReduceOp::kSum);
    std::optional<Communicator> half = comm.split(rank % 2, rank);
    ASSERT_TRUE(half.has_value());
    std::vector<int32_t> b(300, rank);
    half->allgather(b.data() + half->rank() * 150, b.data(), 150, DataType::kInt32);
  });
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 8u) << ::testing::PrintToString(files);
  for (int r = 0; r < 4; ++r) {
    const json parent = readTrace(dir + "/sub.rank" + std::to_string(r) + ".json");
    EXPECT_EQ(parent["otherData"]["size"], 4);
    bool split = false;
    for (const json& e : parent["traceEvents"]) {
      split |=
          e.value("cat", "") == "collective" && e["name"].get<std::string>().rfind("split", 0) == 0;
    }
    EXPECT_TRUE(split) << "rank " << r << "'s file lacks the split";
  }
  int children = 0;
  for (const std::string& name : files) {
    if (name.find(".split") == std::string::npos) continue;
    ++children;
    const json child = readTrace(dir + "/" + name);
    EXPECT_EQ(child["otherData"]["size"], 2) << name;
    EXPECT_FALSE(stepsOf(child, "allgather").empty()) << name;
  }
  EXPECT_EQ(children, 4);
  std::filesystem::remove_all(dir);
}

TEST(Trace, OffWritesNothingAndAnUnwritablePathDoesNotFailTheJob) {
  const std::string dir = makeTempDir("ringlet-trace");
  for (const std::string& path : {std::string(), dir + "/no/such/dir/t"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm =
          Communicator::create(Bootstrap::forThread(rank, size, store), traced(path));
      std::vector<float> a(100, 1.0f);
      comm.allreduce(std::span(a), ReduceOp::kSum);
      EXPECT_EQ(a[0], 2.0f);
    });
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringlet::testing
