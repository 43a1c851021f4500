// The algorithm choice as a communicator makes it: forced per collective, from a given or a
// measured cost model agreed by all ranks, and ranks that force different algorithms get a
// named mismatch rather than a hang or wrong data.
#include <gtest/gtest.h>

#include <sched.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ringlet/ringlet.h"
#include "src/config.h"
#include "tests/store/env_guard.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

CommunicatorOptions localOptions() {
  CommunicatorOptions o;
  o.timeout = 10s;
  o.transport = "local";
  return o;
}

TEST(AlgorithmChoice, ForcedAlgorithmsAreUsedAtEverySize) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.algorithms = {{"allreduce", "rabenseifner"}, {"allgather", "bruck"}, {"reduce", "tree"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (size_t bytes : {size_t{1024}, size_t{1} << 28}) {
      EXPECT_EQ(comm.algorithmFor("allreduce", bytes), "rabenseifner");
      EXPECT_EQ(comm.algorithmFor("allgather", bytes), "bruck");
      EXPECT_EQ(comm.algorithmFor("reduce", bytes), "tree");
    }
    o.algorithms = {{"allgather", "recursive_doubling"}, {"reducescatter", "recursive_halving"}};
    Communicator halving = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (size_t bytes : {size_t{1024}, size_t{1} << 28}) {
      EXPECT_EQ(halving.algorithmFor("allgather", bytes), "recursive_doubling");
      EXPECT_EQ(halving.algorithmFor("reducescatter", bytes), "recursive_halving");
    }
    EXPECT_THROW(comm.algorithmFor("allreduc", 8), InvalidArgument);
  });
}

TEST(AlgorithmChoice, UnknownNamesAreRejectedByCreate) {
  runThreadRanks(1, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.algorithms = {{"allreduce", "bruck"}};
    try {
      Communicator::create(Bootstrap::forThread(rank, size, store), o);
      ADD_FAILURE() << "create accepted allreduce:bruck";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'bruck'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rabenseifner"), std::string::npos) << e.what();
    }
    o.algorithms.clear();
    o.costModel = CostModel{.alpha = -1};
    EXPECT_THROW(Communicator::create(Bootstrap::forThread(rank, size, store), o), InvalidArgument);
    const std::pair<CostModel, std::string> refused[] = {
        {CostModel{.ranksPerCore = 0.5}, "ranksPerCore 0.5"},
        {CostModel{.linkMemoryFactor = 0.5}, "linkMemoryFactor 0.5"},
        {CostModel{.oneWayMemoryFactor = 0.9}, "oneWayMemoryFactor 0.9"},
        {CostModel{.linkMemoryMidFactor = -1}, "linkMemoryMidFactor -1"},
        {CostModel{.oneWayMemoryMidFactor = std::nan("")}, "oneWayMemoryMidFactor nan"}};
    for (const auto& [model, named] : refused) {
      o.costModel = model;
      try {
        Communicator::create(Bootstrap::forThread(rank, size, store), o);
        ADD_FAILURE() << "create accepted " << named;
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
      }
    }
  });
}

TEST(AlgorithmChoice, EnvironmentVariablesAreParsedAndNamedWhenMalformed) {
  EnvGuard env;
  env.set("RINGLET_ALGO", "allreduce:ring,alltoall:bruck");
  env.set("RINGLET_COST_MODEL", "alpha=3e-6,beta=1e-10,gamma=2e-10,delta=4e-11");
  config::reloadEnvironment();
  const CommunicatorOptions o = CommunicatorOptions::fromEnvironment();
  EXPECT_EQ(o.algorithms.at("allreduce"), "ring");
  EXPECT_EQ(o.algorithms.at("alltoall"), "bruck");
  ASSERT_TRUE(o.costModel.has_value());
  EXPECT_DOUBLE_EQ(o.costModel->alpha, 3e-6);
  EXPECT_DOUBLE_EQ(o.costModel->delta, 4e-11);
  EXPECT_DOUBLE_EQ(o.costModel->linkMemoryFactor, 0.0);  // unset: memoryFactor's
  env.set("RINGLET_COST_MODEL",
          "alpha=3e-6,beta=1e-10,gamma=2e-10,delta=4e-11,linkmemory=1.5,onewaymemory=1.2,"
          "linkmemorymid=1.1,onewaymemorymid=1.05,lentblock=4194304");
  config::reloadEnvironment();
  const CostModel given = *CommunicatorOptions::fromEnvironment().costModel;
  EXPECT_DOUBLE_EQ(given.lentBlockBytes, 4194304.0);
  EXPECT_DOUBLE_EQ(o.costModel->lentBlockBytes, 0.0);  // unset: any size
  EXPECT_DOUBLE_EQ(given.linkMemoryFactor, 1.5);
  EXPECT_DOUBLE_EQ(given.oneWayMemoryFactor, 1.2);
  EXPECT_DOUBLE_EQ(given.linkMemoryMidFactor, 1.1);
  EXPECT_DOUBLE_EQ(given.oneWayMemoryMidFactor, 1.05);
  env.set("RINGLET_COST_MODEL", "alpha=3e-6,beta=1e-10,gamma=2e-10");
  try {
    config::reloadEnvironment();
    CommunicatorOptions::fromEnvironment();
    ADD_FAILURE() << "a cost model without delta was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("delta is missing"), std::string::npos) << e.what();
  }
  env.set("RINGLET_COST_MODEL", "alpha=3e-6,beta=1e-10,gamma=2e-10,delta=4e-11");
  env.set("RINGLET_ALGO", "allreduce=ring");
  try {
    config::reloadEnvironment();
    CommunicatorOptions::fromEnvironment();
    ADD_FAILURE() << "RINGLET_ALGO=allreduce=ring was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RINGLET_ALGO"), std::string::npos) << e.what();
  }
}

// An unrooted call of zero bytes runs no algorithm on more than one rank (its header goes on and it
// returns), so algorithmFor names none for it, forced or not; the rooted calls and the barrier
// keep theirs (on three ranks the chain of call headers), and one rank copies.
TEST(AlgorithmChoice, UnrootedCallsOfZeroBytesRunNoAlgorithm) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.algorithms = {{"allgather", "ring"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (const char* c :
         {"allreduce", "allgather", "reducescatter", "alltoall", "allgatherv", "reducescatterv"}) {
      EXPECT_EQ(comm.algorithmFor(c, 0), "none") << c;
      EXPECT_NE(comm.algorithmFor(c, 3 * 64), "none") << c;
    }
    for (const char* c : {"broadcast", "reduce", "gather", "scatter", "gatherv", "scatterv"}) {
      EXPECT_NE(comm.algorithmFor(c, 0), "none") << c;
    }
    const std::vector<size_t> empty(3, 0), one = {0, 8, 0};
    EXPECT_EQ(comm.algorithmFor("allgatherv", empty), "none");
    EXPECT_EQ(comm.algorithmFor("reducescatterv", empty), "none");
    EXPECT_NE(comm.algorithmFor("allgatherv", one), "none");
    EXPECT_NE(comm.algorithmFor("gatherv", empty, 1), "none");
    // The rooted ones of zero bytes ride the chain of call headers, gather-v and scatter-v as
    // gather and scatter (they had taken the tree's round of headers: 5x the time).
    for (const char* c : {"gather", "scatter"}) {
      EXPECT_EQ(comm.algorithmFor(c, 0), "header_inline") << c;
    }
    EXPECT_EQ(comm.algorithmFor("gatherv", empty, 1), "header_inline");
    EXPECT_EQ(comm.algorithmFor("scatterv", empty, 2), "header_inline");
  });
  runThreadRanks(1, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm =
        Communicator::create(Bootstrap::forThread(rank, size, store), localOptions());
    EXPECT_EQ(comm.algorithmFor("allreduce", 0), "local_copy");
    EXPECT_EQ(comm.algorithmFor("allgather", 0), "local_copy");
  });
}

// Two ranks: data that fits a call header rides in it for every collective unless an algorithm
// is forced; the results are checked against what each rank sent.
TEST(AlgorithmChoice, TwoRanksCarrySmallDataInTheCallHeader) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (const char* c :
         {"broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter"}) {
      EXPECT_EQ(comm.algorithmFor(c, 64), "header_inline") << c;
      // Past what a header holds, the rooted calls in which one rank only sends still go as one
      // header with the data after it (up to 16 KiB); the others exchange.
      const std::string name = c;
      const bool oneWay =
          name == "broadcast" || name == "reduce" || name == "gather" || name == "scatter";
      EXPECT_EQ(comm.algorithmFor(c, 4096) == "header_inline", oneWay) << c;
      EXPECT_NE(comm.algorithmFor(c, 1 << 16), "header_inline") << c;
    }
    // Data after the header, both ways round: every value arrives.
    for (int root : {0, 1}) {
      std::vector<int64_t> big(1000, -1);
      if (rank == root) {
        for (size_t j = 0; j < big.size(); ++j) big[j] = 7 * int64_t(j) + root;
      }
      comm.broadcast(big.data(), big.size(), DataType::kInt64, root);
      for (size_t j = 0; j < big.size(); ++j) ASSERT_EQ(big[j], 7 * int64_t(j) + root) << j;
      std::vector<int64_t> mineBig(1000), sumBig(1000, -1);
      for (size_t j = 0; j < mineBig.size(); ++j) mineBig[j] = int64_t(j) * (rank + 1);
      comm.reduce(mineBig.data(), sumBig.data(), mineBig.size(), DataType::kInt64, ReduceOp::kSum,
                  root);
      std::vector<int64_t> both(2000, -1);
      comm.gather(mineBig.data(), both.data(), mineBig.size(), DataType::kInt64, root);
      std::vector<int64_t> part(1000, -1);
      comm.scatter(both.data(), part.data(), part.size(), DataType::kInt64, root);
      for (size_t j = 0; j < part.size(); ++j) ASSERT_EQ(part[j], int64_t(j) * (rank + 1)) << j;
      if (rank == root) {
        for (size_t j = 0; j < sumBig.size(); ++j) ASSERT_EQ(sumBig[j], 3 * int64_t(j)) << j;
        for (size_t j = 0; j < 1000; ++j) {
          ASSERT_EQ(both[j], int64_t(j)) << j;
          ASSERT_EQ(both[1000 + j], 2 * int64_t(j)) << j;
        }
      }
    }
    std::vector<int32_t> mine = {10 * rank + 1, 10 * rank + 2};
    std::vector<int32_t> out(4, -1);
    comm.allgather(mine.data(), out.data(), 2, DataType::kInt32);
    EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 11, 12}));
    comm.allToAll(std::vector<int32_t>{rank, rank + 100}.data(), out.data(), 1, DataType::kInt32);
    EXPECT_EQ(out[0], rank == 0 ? 0 : 100);
    EXPECT_EQ(out[1], rank == 0 ? 1 : 101);
    std::vector<int32_t> block(1, -1);
    comm.reduceScatter(std::vector<int32_t>{rank + 1, rank + 5}.data(), block.data(), 1,
                       DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(block[0], rank == 0 ? 3 : 11);
    int32_t value = rank == 1 ? 77 : 0;
    comm.broadcast(&value, 1, DataType::kInt32, 1);
    EXPECT_EQ(value, 77);
    float sum = 0;
    const float in = rank + 0.5f;
    comm.reduce(&in, &sum, 1, DataType::kFloat32, ReduceOp::kAvg, 0);
    if (rank == 0) {
      EXPECT_FLOAT_EQ(sum, 1.0f);
    }
    CommunicatorOptions forced = localOptions();
    forced.algorithms = {{"broadcast", "tree"}};
    Communicator tree = Communicator::create(Bootstrap::forThread(rank, size, store), forced);
    EXPECT_EQ(tree.algorithmFor("broadcast", 64), "tree");
    EXPECT_EQ(tree.algorithmFor("gather", 64), "header_inline");
  });
}

TEST(AlgorithmChoice, GivenModelDrivesTheChoice) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.costModel = CostModel{.alpha = 1e-3, .beta = 1e-12, .gamma = 1e-12, .delta = 1e-12};
    Communicator slow = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(slow.costModel().alpha, 1e-3);
    EXPECT_EQ(slow.algorithmFor("allreduce", 1 << 20), "recursive_doubling");
    EXPECT_EQ(slow.algorithmFor("alltoall", 1 << 20), "bruck");
    // Cheap messages: the bandwidth-optimal schedules. Rabenseifner moves the ring's bytes in
    // fewer messages at 1 MiB (2 x 2 exchanges of one slice each against the ring's 6 steps), and
    // the ring's pipeline wins where the exchanges take many slices.
    o.costModel = CostModel{.alpha = 1e-9, .beta = 1e-9, .gamma = 1e-9, .delta = 1e-9};
    Communicator fast = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(fast.algorithmFor("allreduce", 1 << 20), "rabenseifner");
    EXPECT_EQ(fast.algorithmFor("allreduce", 1 << 26), "ring");
    EXPECT_EQ(fast.algorithmFor("alltoall", 1 << 20), "pairwise");
  });
}

// A communicator remembers its last choice per collective: a size asked again, after others,
// gets the answer a communicator asking it first would give.
TEST(AlgorithmChoice, RememberedChoicesMatchFreshOnes) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.costModel = CostModel{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 1e-10};
    const std::vector<size_t> sizes = {8, 4096, 1 << 16, 1 << 20, 1 << 26};
    Communicator fresh = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::map<std::pair<std::string, size_t>, std::string> want;
    for (const auto& info : algorithms()) {
      for (size_t bytes : sizes)
        want[{info.collective, bytes}] = fresh.algorithmFor(info.collective, bytes);
    }
    const std::string smallest = want[{"allreduce", 8}];
    EXPECT_NE(smallest, (want[{"allreduce", size_t{1} << 26}]));
    Communicator reused = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (size_t i : {0, 4, 0, 0, 2, 4, 1, 1, 3, 0, 3, 2}) {
      for (const auto& info : algorithms()) {
        EXPECT_EQ(reused.algorithmFor(info.collective, sizes[i]),
                  (want[{info.collective, sizes[i]}]))
            << info.collective << " at " << sizes[i] << " bytes";
      }
    }
  });
}

TEST(AlgorithmChoice, MeasuredModelIsTheSameOnEveryRank) {
  for (const char* transport : {"local", "shm"}) {
    runThreadRanks(3, [transport](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o = localOptions();
      o.transport = transport;
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      const CostModel m = comm.costModel();
      for (double v : {m.alpha, m.beta, m.gamma, m.delta}) {
        EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
      }
      EXPECT_GT(m.alpha, 0);
      EXPECT_GE(m.ranksPerCore, 1.0);
      double mine[] = {m.alpha,
                       m.beta,
                       m.gamma,
                       m.delta,
                       m.ranksPerCore,
                       m.allToAllLends ? 1.0 : 0.0,
                       m.linkMemoryFactor,
                       m.oneWayMemoryFactor,
                       m.linkMemoryMidFactor,
                       m.oneWayMemoryMidFactor};
      constexpr size_t kCount = std::size(mine);
      std::vector<double> all(kCount * size);
      comm.allgather(mine, all.data(), kCount, DataType::kFloat64);
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(std::memcmp(all.data() + kCount * r, mine, sizeof mine), 0) << "rank " << r;
      }
      // The caller's calls are numbered from 0 (the measurement is not one of them): the
      // all-gather was #0, so this mismatch is #1.
      try {
        if (rank == 0) {
          comm.barrier();
        } else {
          comm.allreduce(mine, 1, DataType::kFloat64, ReduceOp::kMax);
        }
        ADD_FAILURE() << "rank " << rank << " finished a call the ranks disagree about";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("call #1"), std::string::npos) << e.what();
      }
    });
  }
}

// recalibrate() measures the model again, given by the options or not: the same on every rank,
// the calls after it choose with it, and it is a call of the caller's numbering, so a rank that
// makes another call meanwhile gets an error naming the calibration, on every rank.
TEST(AlgorithmChoice, RecalibrateMeasuresTheModelAgainOnEveryRank) {
  for (const char* transport : {"local", "shm"}) {
    runThreadRanks(3, [transport](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o = localOptions();
      o.transport = transport;
      // A model no machine measures: a second per message makes every choice a log-step one.
      o.costModel = CostModel{.alpha = 1.0, .beta = 1e-10, .gamma = 1e-11, .delta = 1e-11};
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      EXPECT_EQ(comm.costModel().alpha, 1.0);
      EXPECT_EQ(comm.algorithmFor("allreduce", 64 << 20), "recursive_doubling");
      std::vector<float> data(1 << 10, 1.0f);
      // Queued before it: it runs after them.
      Work queued = comm.allreduceAsync(data.data(), data.data(), data.size(), DataType::kFloat32,
                                        ReduceOp::kSum);  // call #0
      comm.recalibrate();                                 // call #1
      EXPECT_TRUE(queued.test());
      queued.wait();
      const CostModel m = comm.costModel();
      EXPECT_GT(m.alpha, 0);
      EXPECT_LT(m.alpha, 0.1);  // measured: microseconds, not the second given
      EXPECT_TRUE(std::isfinite(m.beta) && m.beta > 0) << m.beta;
      EXPECT_GE(m.ranksPerCore, 1.0);
      double mine[5] = {m.alpha, m.beta, m.gamma, m.delta, m.betaOneWay};
      std::vector<double> all(5 * size);
      comm.allgather(mine, all.data(), 5, DataType::kFloat64);  // call #2
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(std::memcmp(all.data() + 5 * r, mine, sizeof mine), 0) << "rank " << r;
      }
      // The calls after it choose with the measured model: at 64 MiB the algorithm it prices
      // cheapest (whichever that is on this machine now), and still compute the right sums.
      std::string cheapest;
      double least = 0;
      for (const char* algorithm : {"ring", "recursive_doubling", "rabenseifner"}) {
        const double t =
            predictSeconds(m, "allreduce", algorithm, size, 64 << 20, comm.segmentBytes());
        if (cheapest.empty() || t < least) {
          cheapest = algorithm;
          least = t;
        }
      }
      EXPECT_EQ(comm.algorithmFor("allreduce", 64 << 20), cheapest);
      comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);  // call #3
      EXPECT_EQ(data[0], 9.0f);  // 1 summed over three ranks, twice
      EXPECT_EQ(data.back(), 9.0f);
      // Rank 0 measures again while the others call a barrier: call #4 fails on every rank,
      // naming the calibration.
      try {
        if (rank == 0) {
          comm.recalibrate();
        } else {
          comm.barrier();
        }
        ADD_FAILURE() << "rank " << rank << " finished a call the ranks disagree about";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("call #4"), std::string::npos) << what;
        EXPECT_NE(what.find("calibration"), std::string::npos) << what;
      }
    });
  }
}

// Where two or more ranks take turns on each core of one host, shared-memory links between
// processes cut the pipeline into 256 KiB slices and TCP into 4 MiB (from the ranks' placement,
// before any calibration); ranks with a core each keep 512 KiB, point-to-point messages the
// default, and the options' segmentBytes wins over all of them. Four processes pinned to (at
// most) two CPUs take turns on them.
TEST(AlgorithmChoice, RanksTakingTurnsOnCoresSliceByTheirTransport) {
  auto pinToTwoCpus = [] {
    cpu_set_t allowed, two;
    CPU_ZERO(&allowed);
    CPU_ZERO(&two);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
      ADD_FAILURE() << "sched_getaffinity failed";
      return 0;
    }
    for (int cpu = 0, kept = 0; cpu < CPU_SETSIZE && kept < 2; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) {
        CPU_SET(cpu, &two);
        ++kept;
      }
    }
    if (sched_setaffinity(0, sizeof(two), &two) != 0) {
      ADD_FAILURE() << "sched_setaffinity failed";
      return 0;
    }
    return CPU_COUNT(&two);
  };
  auto sliceOf = [](int rank, int size, std::shared_ptr<Store> store, const char* transport,
                    size_t segmentBytes = 0) {
    CommunicatorOptions o;
    o.timeout = 30s;
    o.transport = transport;
    o.costModel = CostModel{};  // the slice does not wait for a calibration
    o.segmentBytes = segmentBytes;
    return Communicator::create(Bootstrap::forThread(rank, size, store), o).segmentBytes();
  };
  runProcessRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
    pinToTwoCpus();
    EXPECT_EQ(sliceOf(rank, size, store, "shm"), size_t{256} << 10);
    EXPECT_EQ(sliceOf(rank, size, store, "auto"), size_t{256} << 10);
    EXPECT_EQ(sliceOf(rank, size, store, "tcp"), size_t{4} << 20);
    EXPECT_EQ(sliceOf(rank, size, store, "shm", 96 << 10), size_t{96} << 10);
    // Point-to-point messages keep the default slice, so a link buffers as many bytes as before:
    // every rank sends its next one 2.8 MB (6 slices of 512 KiB, 11 of 256 KiB: more than the
    // link's 8 slots) before it receives from its previous one, and no send waits for its recv.
    CommunicatorOptions o;
    o.timeout = 30s;
    o.transport = "shm";
    o.costModel = CostModel{};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::vector<int32_t> out(700001), in(700001, -1);
    for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<int32_t>(j) * 7 + rank;
    comm.send(out.data(), out.size(), DataType::kInt32, (rank + 1) % size, 5);
    comm.recv(in.data(), in.size(), DataType::kInt32, (rank + size - 1) % size, 5);
    for (size_t j = 0; j < in.size(); j += 4099) {
      ASSERT_EQ(in[j], static_cast<int32_t>(j) * 7 + (rank + size - 1) % size) << j;
    }
  });
  runProcessRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    if (pinToTwoCpus() < 2) return;  // one CPU: these two take turns too
    EXPECT_EQ(sliceOf(rank, size, store, "shm"), size_t{512} << 10);
    EXPECT_EQ(sliceOf(rank, size, store, "tcp"), size_t{512} << 10);
  });
}

// What a link's byte costs past the cache is measured by a shift of 16 MiB where ranks have
// cores of their own (0 where they share: memoryFactor's ramp then), and with it a one-way
// stream's and both half way, once per process and kind of ring: a second communicator of the
// same kind keeps the first one's factors (measured again, they would differ by the machine's
// noise).
TEST(AlgorithmChoice, TheLinkMemoryFactorIsMeasuredOncePerKindOfRing) {
  for (int ranks : {2, 3}) {
    runThreadRanks(ranks, [](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o = localOptions();
      o.transport = "shm";
      Communicator first = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      const CostModel m = first.costModel();
      // The one-way ones are over the one-way rate: not measured (0) where it was not (every
      // pair's 1 MiB stream inside its round trip, a machine too busy to time it).
      const bool oneWay = m.betaOneWay > 0;
      const std::pair<double, bool> factors[] = {{m.linkMemoryFactor, true},
                                                 {m.linkMemoryMidFactor, true},
                                                 {m.oneWayMemoryFactor, oneWay},
                                                 {m.oneWayMemoryMidFactor, oneWay}};
      for (const auto& [factor, measured] : factors) {
        if (m.ranksShareCores || !measured) {
          EXPECT_EQ(factor, 0.0);
        } else {
          EXPECT_GE(factor, 1.0);
          EXPECT_TRUE(std::isfinite(factor));
        }
      }
      Communicator second = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      const CostModel kept = second.costModel();
      EXPECT_EQ(kept.linkMemoryFactor, m.linkMemoryFactor);
      EXPECT_EQ(kept.oneWayMemoryFactor, m.oneWayMemoryFactor);
      EXPECT_EQ(kept.linkMemoryMidFactor, m.linkMemoryMidFactor);
      EXPECT_EQ(kept.oneWayMemoryMidFactor, m.oneWayMemoryMidFactor);
    });
  }
}

// On two ranks a small rooted call's data follows its header, but a broadcast's or a
// scatter's message that the links lend (from 16 KiB, Link::kLendMinBytes) goes by the tree,
// whose receiver reads it from the root's buffer; a reduce's and a gather's stay after the
// header, as does everything where the links lend nothing (TCP) or ranks share cores.
TEST(AlgorithmChoice, TwoRanksSendALentBroadcastOrScatterByTheTree) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    CostModel model{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-11, .delta = 5e-11};
    for (double direct : {0.0, double(1 << 20)}) {
      for (bool shared : {false, true}) {
        model.directBytes = direct;
        model.ranksShareCores = shared;
        o.costModel = model;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        const bool lent = direct > 0 && !shared;
        const std::string tree = lent ? "tree" : "header_inline";
        EXPECT_EQ(comm.algorithmFor("broadcast", 16384), tree) << direct << " " << shared;
        EXPECT_EQ(comm.algorithmFor("broadcast", 16380), "header_inline");
        EXPECT_EQ(comm.algorithmFor("scatter", 32768), tree);  // blocks of 16 KiB
        const size_t blocks[] = {16384, 16384};
        EXPECT_EQ(comm.algorithmFor("scatterv", blocks), tree);
        EXPECT_EQ(comm.algorithmFor("scatter", 32760), "header_inline");
        EXPECT_EQ(comm.algorithmFor("reduce", 16384), "header_inline");
        EXPECT_EQ(comm.algorithmFor("gather", 32768), "header_inline");
        EXPECT_EQ(comm.algorithmFor("gatherv", blocks), "header_inline");
      }
    }
  });
}

TEST(AlgorithmChoice, RanksForcingDifferentAlgorithmsGetANamedMismatch) {
  for (size_t count : {size_t{4}, size_t{10000}}) {
    runThreadRanks(2, [count](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o = localOptions();
      o.timeout = 5s;
      o.algorithms = {{"allreduce", rank == 0 ? "ring" : "rabenseifner"}};
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      std::vector<float> data(count, 1.0f);
      try {
        comm.allreduce(data.data(), count, DataType::kFloat32, ReduceOp::kSum);
        ADD_FAILURE() << "rank " << rank << " finished an all-reduce the ranks disagree about";
      } catch (const MismatchError& e) {
        EXPECT_NE(std::string(e.what()).find("RINGLET_ALGO"), std::string::npos) << e.what();
      } catch (const PeerError&) {
        // the other rank saw the mismatch first and aborted: named, no hang
      }
    });
  }
}

// The two-level all-gather and reduce-scatter (collectives/hierarchical.cc, exact on grids of
// several "hosts" in hierarchical_test): never the model's choice on one host; forced there, one
// host of every rank, its rings are the host-ordered ring, and the results exact.
TEST(AlgorithmChoice, HierarchicalIsForcedAcrossHostsOnlyAndExactOnOne) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    Communicator model = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (size_t bytes : {size_t{64}, size_t{1} << 20, size_t{256} << 20}) {
      EXPECT_NE(model.algorithmFor("allgather", bytes), "hierarchical");
      EXPECT_NE(model.algorithmFor("reducescatter", bytes), "hierarchical");
      EXPECT_NE(model.algorithmFor("allreduce", bytes), "hierarchical");
    }
    o.algorithms = {{"allgather", "hierarchical"},
                    {"reducescatter", "hierarchical"},
                    {"allreduce", "hierarchical"}};
    o.segmentBytes = 256;
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(comm.algorithmFor("allgather", 64), "hierarchical");
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}}) {
      std::vector<float> mine(count), all(count * size);
      for (size_t j = 0; j < count; ++j) mine[j] = static_cast<float>(rank * 1000 + j);
      comm.allgather(mine.data(), all.data(), count, DataType::kFloat32);
      for (int r = 0; r < size; ++r) {
        for (size_t j = 0; j < count; ++j) {
          ASSERT_EQ(all[r * count + j], static_cast<float>(r * 1000 + j)) << r << " " << j;
        }
      }
      std::vector<double> in(count * size), out(count);
      for (size_t j = 0; j < in.size(); ++j) in[j] = static_cast<double>(j + rank);
      comm.reduceScatter(in.data(), out.data(), count, DataType::kFloat64, ReduceOp::kAvg);
      for (size_t j = 0; j < count; ++j) {
        ASSERT_EQ(out[j], static_cast<double>(rank * count + j) + 1.0) << j;  // mean of +0,1,2
      }
      // All-reduce of count + 1 elements (uneven chunks), in place.
      std::vector<int32_t> sum(count + 1);
      for (size_t j = 0; j < sum.size(); ++j) sum[j] = static_cast<int32_t>(j * (rank + 1));
      comm.allreduce(sum.data(), sum.data(), sum.size(), DataType::kInt32, ReduceOp::kSum);
      for (size_t j = 0; j < sum.size(); ++j) ASSERT_EQ(sum[j], static_cast<int32_t>(6 * j)) << j;
    }
    EXPECT_EQ(comm.algorithmFor("allreduce", 1 << 20), "hierarchical");
  });
}

// The v-forms choose by their own names: forcing the equal-block collectives leaves them to the
// model, which takes recursive doubling and halving for a few bytes on four ranks and the ring
// for tens of MiB; ranks that force different ones get the named mismatch.
TEST(AlgorithmChoice, VFormsAreForcedByTheirOwnNames) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.costModel = CostModel{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 5e-11};
    o.algorithms = {{"allgather", "ring"}, {"reducescatter", "ring"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(comm.algorithmFor("allgather", 64), "ring");
    EXPECT_EQ(comm.algorithmFor("allgatherv", 64), "recursive_doubling");
    EXPECT_EQ(comm.algorithmFor("reducescatterv", 64), "recursive_halving");
    EXPECT_EQ(comm.algorithmFor("allgatherv", size_t{48} << 20), "ring");
    EXPECT_EQ(comm.algorithmFor("reducescatterv", size_t{48} << 20), "ring");
    o.algorithms = {{"allgatherv", "ring"}, {"reducescatterv", "recursive_halving"}};
    Communicator forced = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(forced.algorithmFor("allgatherv", 64), "ring");
    EXPECT_EQ(forced.algorithmFor("reducescatterv", size_t{48} << 20), "recursive_halving");
  });
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.timeout = 5s;
    o.algorithms = {{"allgatherv", rank == 0 ? "ring" : "recursive_doubling"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    const std::vector<size_t> counts = {3, 0, 5};
    std::vector<float> mine(counts[rank], 1.0f), all(8);
    try {
      comm.allgatherv(mine.data(), all.data(), counts, DataType::kFloat32);
      ADD_FAILURE() << "rank " << rank << " finished an all-gather-v the ranks disagree about";
    } catch (const MismatchError& e) {
      EXPECT_NE(std::string(e.what()).find("RINGLET_ALGO"), std::string::npos) << e.what();
    } catch (const PeerError&) {
      // another rank saw the mismatch first and aborted: named, no hang
    }
  });
}

// Gather-v and scatter-v choose by their own names too, from the counts every rank passes:
// the tree for a few bytes, the linear schedule for large blocks; ranks that force different
// ones get the named mismatch, whichever rank is the root (a rank that only sends, at its next
// call).
TEST(AlgorithmChoice, RootedVFormsAreForcedByTheirOwnNames) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o = localOptions();
    o.costModel = CostModel{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 5e-11};
    o.algorithms = {{"gather", "tree"}, {"scatter", "tree"}};
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    EXPECT_EQ(comm.algorithmFor("gather", size_t{48} << 20), "tree");
    for (const char* c : {"gatherv", "scatterv"}) {
      EXPECT_EQ(comm.algorithmFor(c, 64), "tree") << c;
      EXPECT_EQ(comm.algorithmFor(c, size_t{48} << 20), "linear") << c;
    }
  });
  for (int root : {0, 2}) {
    for (bool gather : {true, false}) {
      runThreadRanks(3, [root, gather](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o = localOptions();
        o.timeout = 5s;
        const char* name = gather ? "gatherv" : "scatterv";
        o.algorithms = {{name, rank == 1 ? "tree" : "linear"}};
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        const std::vector<size_t> counts = {3, 0, 5};
        std::vector<float> mine(counts[rank], 1.0f), all(8);
        try {
          if (gather) {
            comm.gatherv(mine.data(), all.data(), counts, DataType::kFloat32, root);
          } else {
            comm.scatterv(all.data(), counts, mine.data(), DataType::kFloat32, root);
          }
          // Only a rank whose part is only to send may finish (its header went out before the
          // disagreement reached it); its next call fails, naming the call.
          const bool onlySends = gather ? rank != root : rank == root;
          EXPECT_TRUE(onlySends) << "rank " << rank << " finished a " << name
                                 << " the ranks disagree about";
          try {
            comm.barrier();
            ADD_FAILURE() << "rank " << rank << ": the call after the disagreement succeeded";
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
          }
        } catch (const MismatchError& e) {
          EXPECT_NE(std::string(e.what()).find("RINGLET_ALGO"), std::string::npos) << e.what();
        } catch (const PeerError&) {
          // another rank saw the mismatch first and aborted: named, no hang
        }
      });
    }
  }
}

}  // namespace
}  // namespace ringlet::testing
