#include "tests/collectives/matrix.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "tests/collectives/data.h"

namespace ringlet::testing {
namespace {

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

// Checks every element; reports the first few mismatches with their position.
void expectAllreduce(const std::string& what, DataType type, ReduceOp op, int size,
                     const std::byte* out, size_t count) {
  int reported = 0;
  size_t wrong = 0;
  for (size_t j = 0; j < count; ++j) {
    const double want = expectedAllreduce(type, op, size, j);
    const double got = loadValue(type, out, j);
    if (got != want) {
      ++wrong;
      if (reported++ < 3)
        ADD_FAILURE() << what << ": element " << j << " is " << got << ", want " << want;
    }
  }
  if (wrong > 0) ADD_FAILURE() << what << ": " << wrong << " of " << count << " elements wrong";
}

void allreduceCase(Communicator& comm, DataType type, ReduceOp op, size_t count, bool inPlace) {
  if (op == ReduceOp::kAvg && !isFloatingPoint(type)) return;
  const std::string what =
      fmt::format("rank {} allreduce {} {} count {} {}", comm.rank(), toString(type), toString(op),
                  count, inPlace ? "in-place" : "out-of-place");
  std::vector<std::byte> input = makeInput(type, count, comm.rank(), op);
  const std::byte guard{0x5a};
  if (inPlace) {
    input.back() = guard;
    comm.allreduce(input.data(), count, type, op);
    expectAllreduce(what, type, op, comm.size(), input.data(), count);
    EXPECT_EQ(input.back(), guard) << what << ": wrote past the end";
  } else {
    const size_t total = input.size();  // >= 1: makeInput adds a guard byte
    std::vector<std::byte> output(total, std::byte{0x77});
    output[total - 1] = guard;
    const std::vector<std::byte> before = input;
    comm.allreduce(input.data(), output.data(), count, type, op);
    expectAllreduce(what, type, op, comm.size(), output.data(), count);
    EXPECT_EQ(output[total - 1], guard) << what << ": wrote past the end";
    EXPECT_TRUE(before == input) << what << ": changed the send buffer";
  }
}

void broadcastCase(Communicator& comm, DataType type, size_t count, int root) {
  const size_t bytes = count * elementSize(type);
  std::vector<std::byte> buffer(bytes + 1, std::byte{0});
  for (size_t i = 0; i < bytes; ++i) {
    buffer[i] =
        comm.rank() == root ? std::byte(static_cast<uint8_t>(i * 31 + root + 1)) : std::byte{0xee};
  }
  buffer.back() = std::byte{0x5a};
  comm.broadcast(buffer.data(), count, type, root);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[i] != std::byte(static_cast<uint8_t>(i * 31 + root + 1))) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << "rank " << comm.rank() << " broadcast " << toString(type) << " count "
                       << count << " root " << root;
  EXPECT_EQ(buffer.back(), std::byte{0x5a}) << "broadcast wrote past the end";
}

// Rank r's block of the all-reduce of every rank's makeInput(size * count).
void reduceScatterCase(Communicator& comm, DataType type, ReduceOp op, size_t count, bool inPlace) {
  if (op == ReduceOp::kAvg && !isFloatingPoint(type)) return;
  const std::string what =
      fmt::format("rank {} reduce_scatter {} {} count {} {}", comm.rank(), toString(type),
                  toString(op), count, inPlace ? "in-place" : "out-of-place");
  const size_t total = count * comm.size();
  const size_t element = elementSize(type);
  std::vector<std::byte> input = makeInput(type, total, comm.rank(), op);  // + a guard byte
  const std::vector<std::byte> before = input;
  std::vector<std::byte> output(count * element + 1, std::byte{0x77});
  output.back() = std::byte{0x5a};
  std::byte* recv = inPlace ? input.data() + comm.rank() * count * element : output.data();
  comm.reduceScatter(input.data(), recv, count, type, op);
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    const double want = expectedAllreduce(type, op, comm.size(), comm.rank() * count + k);
    if (loadValue(type, recv, k) != want && wrong++ < 3) {
      ADD_FAILURE() << what << ": element " << k << " is " << loadValue(type, recv, k) << ", want "
                    << want;
    }
  }
  EXPECT_EQ(wrong, 0u) << what;
  if (!inPlace) {
    EXPECT_EQ(output.back(), std::byte{0x5a}) << what << ": wrote past the end";
    EXPECT_TRUE(before == input) << what << ": changed the send buffer";
  }
}

// Every rank's makeInput(count), in rank order.
void allgatherCase(Communicator& comm, DataType type, size_t count, bool inPlace) {
  const std::string what =
      fmt::format("rank {} allgather {} count {} {}", comm.rank(), toString(type), count,
                  inPlace ? "in-place" : "out-of-place");
  const size_t block = count * elementSize(type);
  std::vector<std::byte> output(block * comm.size() + 1, std::byte{0x77});
  output.back() = std::byte{0x5a};
  std::vector<std::byte> input = makeInput(type, count, comm.rank(), ReduceOp::kSum);
  const std::vector<std::byte> before = input;
  const std::byte* send = input.data();
  if (inPlace) {
    if (block > 0) std::memcpy(output.data() + comm.rank() * block, input.data(), block);
    send = output.data() + comm.rank() * block;
  }
  comm.allgather(send, output.data(), count, type);
  size_t wrong = 0;
  for (int q = 0; q < comm.size(); ++q) {
    const std::vector<std::byte> theirs = makeInput(type, count, q, ReduceOp::kSum);
    if (block > 0 && std::memcmp(output.data() + q * block, theirs.data(), block) != 0) {
      ++wrong;
      ADD_FAILURE() << what << ": block of rank " << q << " differs";
    }
  }
  EXPECT_EQ(wrong, 0u) << what;
  EXPECT_EQ(output.back(), std::byte{0x5a}) << what << ": wrote past the end";
  EXPECT_TRUE(before == input) << what << ": changed the send buffer";
}

// The all-reduce result on the root only; other ranks' recv untouched.
void reduceCase(Communicator& comm, DataType type, ReduceOp op, size_t count, int root,
                bool inPlace) {
  if (op == ReduceOp::kAvg && !isFloatingPoint(type)) return;
  const std::string what =
      fmt::format("rank {} reduce {} {} count {} root {} {}", comm.rank(), toString(type),
                  toString(op), count, root, inPlace ? "in-place" : "out-of-place");
  std::vector<std::byte> input = makeInput(type, count, comm.rank(), op);
  const std::vector<std::byte> before = input;
  std::vector<std::byte> output(input.size(), std::byte{0x77});
  std::byte* recv = inPlace ? input.data() : output.data();
  comm.reduce(input.data(), recv, count, type, op, root);
  if (comm.rank() == root) {
    expectAllreduce(what, type, op, comm.size(), recv, count);
  } else {
    EXPECT_TRUE(before == input) << what << ": a non-root changed its send buffer";
    if (!inPlace) {
      EXPECT_TRUE(std::all_of(output.begin(), output.end(),
                              [](std::byte b) { return b == std::byte{0x77}; }))
          << what << ": a non-root's recv was written";
    }
  }
}

// Gather: the root holds every rank's makeInput(count) in rank order. Scatter: the reverse.
void gatherScatterCase(Communicator& comm, DataType type, size_t count, int root, bool inPlace) {
  const std::string what =
      fmt::format("rank {} gather/scatter {} count {} root {} {}", comm.rank(), toString(type),
                  count, root, inPlace ? "in-place" : "out-of-place");
  const size_t block = count * elementSize(type);
  const int n = comm.size();
  std::vector<std::byte> all(block * n + 1, std::byte{0x77});
  all.back() = std::byte{0x5a};
  std::vector<std::byte> mine = makeInput(type, count, comm.rank(), ReduceOp::kSum);
  const std::byte* send = mine.data();
  if (inPlace && comm.rank() == root) {
    if (block > 0) std::memcpy(all.data() + root * block, mine.data(), block);
    send = all.data() + root * block;
  }
  comm.gather(send, all.data(), count, type, root);
  if (comm.rank() == root) {
    for (int q = 0; q < n; ++q) {
      const auto theirs = makeInput(type, count, q, ReduceOp::kSum);
      EXPECT_TRUE(block == 0 || std::memcmp(all.data() + q * block, theirs.data(), block) == 0)
          << what << ": gathered block of rank " << q << " differs";
    }
    EXPECT_EQ(all.back(), std::byte{0x5a}) << what << ": gather wrote past the end";
  }
  // Scatter back something else: rank q's block becomes makeInput(count, q + 100).
  if (comm.rank() == root) {
    for (int q = 0; q < n; ++q) {
      const auto next = makeInput(type, count, q + 100, ReduceOp::kSum);
      if (block > 0) std::memcpy(all.data() + q * block, next.data(), block);
    }
  }
  std::vector<std::byte> got(block + 1, std::byte{0x11});
  got.back() = std::byte{0x5a};
  std::byte* recv = inPlace && comm.rank() == root ? all.data() + root * block : got.data();
  comm.scatter(all.data(), recv, count, type, root);
  const auto want = makeInput(type, count, comm.rank() + 100, ReduceOp::kSum);
  EXPECT_TRUE(block == 0 || std::memcmp(recv, want.data(), block) == 0)
      << what << ": scattered block differs";
  EXPECT_EQ(got.back(), std::byte{0x5a}) << what << ": scatter wrote past the end";
}

// All-to-all: block q of rank r's input is makeInput(count, r * 100 + q); rank r ends with block
// q = makeInput(count, q * 100 + r).
void allToAllCase(Communicator& comm, DataType type, size_t count, bool inPlace) {
  const std::string what =
      fmt::format("rank {} alltoall {} count {} {}", comm.rank(), toString(type), count,
                  inPlace ? "in-place" : "out-of-place");
  const size_t block = count * elementSize(type);
  const int n = comm.size();
  std::vector<std::byte> input(block * n + 1), output(block * n + 1, std::byte{0x77});
  input.back() = output.back() = std::byte{0x5a};
  for (int q = 0; q < n; ++q) {
    const auto b = makeInput(type, count, comm.rank() * 100 + q, ReduceOp::kSum);
    if (block > 0) std::memcpy(input.data() + q * block, b.data(), block);
  }
  std::byte* recv = inPlace ? input.data() : output.data();
  comm.allToAll(input.data(), recv, count, type);
  for (int q = 0; q < n; ++q) {
    const auto want = makeInput(type, count, q * 100 + comm.rank(), ReduceOp::kSum);
    EXPECT_TRUE(block == 0 || std::memcmp(recv + q * block, want.data(), block) == 0)
        << what << ": block from rank " << q << " differs";
  }
  EXPECT_EQ(output.back(), std::byte{0x5a}) << what << ": wrote past the end";
}

// The async forms, issued back to back before any is waited on.
void asyncCase(Communicator& comm) {
  const int n = comm.size();
  const size_t count = 37;
  const DataType type = DataType::kInt32;
  std::vector<std::byte> input = makeInput(type, count * n, comm.rank(), ReduceOp::kSum);
  std::vector<std::byte> scattered(count * 4), gathered(count * n * 4), reduced(count * n * 4);
  Work a = comm.reduceScatterAsync(input.data(), scattered.data(), count, type, ReduceOp::kSum);
  Work b = comm.allgatherAsync(input.data(), gathered.data(), count, type);
  Work c = comm.reduceAsync(input.data(), reduced.data(), count * n, type, ReduceOp::kSum, n - 1);
  a.wait();
  b.wait();
  c.wait();
  for (size_t k = 0; k < count; ++k) {
    ASSERT_EQ(loadValue(type, scattered.data(), k),
              expectedAllreduce(type, ReduceOp::kSum, n, comm.rank() * count + k))
        << "rank " << comm.rank() << " async reduce_scatter element " << k;
  }
  for (int q = 0; q < n; ++q) {
    const auto theirs = makeInput(type, count * n, q, ReduceOp::kSum);
    ASSERT_EQ(std::memcmp(gathered.data() + q * count * 4, theirs.data(), count * 4), 0)
        << "rank " << comm.rank() << " async allgather block " << q;
  }
  if (comm.rank() == n - 1) {
    expectAllreduce("async reduce", type, ReduceOp::kSum, n, reduced.data(), count * n);
  }
}

void barrierCase(Communicator& comm, Store& store, int round) {
  store.setString(fmt::format("barrier/{}/{}", round, comm.rank()), "in");
  comm.barrier();
  for (int r = 0; r < comm.size(); ++r) {
    EXPECT_TRUE(store.check(fmt::format("barrier/{}/{}", round, r)))
        << "rank " << comm.rank() << " left barrier " << round << " before rank " << r
        << " entered it";
  }
}

}  // namespace

void runCollectiveMatrix(int rank, int size, std::shared_ptr<Store> store,
                         const MatrixOptions& options) {
  const size_t n = static_cast<size_t>(size);
  std::vector<size_t> counts = {0, 1, n > 1 ? n - 1 : 2, n + 1, 4099};
  // One communicator per algorithm of each collective, forced: the pipelined ring / chain /
  // pairwise exchange with tiny slices (many slices per chunk), the log-step ones (recursive
  // doubling, trees, Bruck), and Rabenseifner, recursive doubling all-gather and recursive
  // halving reduce-scatter beside the model's own choice for the rest. The v-forms: the ring,
  // the model's choice, recursive doubling all-gather-v and recursive halving reduce-scatter-v.
  // Gather and scatter (and their v-forms): the model's choice, the tree, the linear schedule.
  const std::vector<std::map<std::string, std::string>> algorithmSets = {
      {{"allreduce", "ring"},
       {"broadcast", "chain"},
       {"reduce", "chain"},
       {"allgather", "ring"},
       {"reducescatter", "hierarchical"},  // one host: the host-ordered ring in effect
       {"alltoall", "pairwise"},
       {"allgatherv", "ring"},
       {"reducescatterv", "ring"}},
      {{"allreduce", "recursive_doubling"},
       {"broadcast", "tree"},
       {"reduce", "tree"},
       {"allgather", "bruck"},
       {"alltoall", "bruck"},
       {"gather", "tree"},
       {"scatter", "tree"},
       {"gatherv", "tree"},
       {"scatterv", "tree"}},
      {{"allreduce", "rabenseifner"},
       {"allgather", "recursive_doubling"},
       {"reducescatter", "recursive_halving"},
       {"allgatherv", "recursive_doubling"},
       {"reducescatterv", "recursive_halving"},
       {"gather", "linear"},
       {"scatter", "linear"},
       {"gatherv", "linear"},
       {"scatterv", "linear"}},
  };
  for (size_t set = 0; set < algorithmSets.size(); ++set) {
    SCOPED_TRACE(fmt::format("algorithms {}", fmt::join(algorithmSets[set], ",")));
    CommunicatorOptions o;
    o.timeout = options.timeout;
    o.transport = options.transport;
    o.transportOptions = options.transportOptions;
    o.segmentBytes = 1024;
    o.algorithms = algorithmSets[set];
    // A fixed model, not a calibration: calibrating in 1 KiB slices sends some 50 MiB in 1 KiB
    // messages, which took all of the 30 s timeout beside other two-rank tcp matrices on two
    // cores (the forced algorithms cover every schedule; the communicators below calibrate).
    o.costModel = CostModel{};
    Bootstrap bootstrap = Bootstrap::forThread(rank, size, store);
    Communicator comm = Communicator::create(bootstrap, o);
    for (DataType type : kTypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) allreduceCase(comm, type, op, count, inPlace);
        }
      }
    }
    for (DataType type : {DataType::kFloat32, DataType::kInt8, DataType::kFloat64}) {
      for (size_t count : counts) {
        for (int root = 0; root < size; ++root) broadcastCase(comm, type, count, root);
      }
    }
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) {
        for (DataType type : kTypes) {
          reduceScatterCase(comm, type, ReduceOp::kSum, count, inPlace);
          allgatherCase(comm, type, count, inPlace);
        }
        for (ReduceOp op : kOps) {
          reduceScatterCase(comm, DataType::kFloat32, op, count, inPlace);
          reduceScatterCase(comm, DataType::kInt32, op, count, inPlace);
          for (int root = 0; root < size; ++root) {
            reduceCase(comm, DataType::kFloat32, op, count, root, inPlace);
          }
        }
        for (DataType type : kTypes) reduceCase(comm, type, ReduceOp::kSum, count, 0, inPlace);
        for (int root = 0; root < size; ++root) {
          gatherScatterCase(comm, DataType::kFloat32, count, root, inPlace);
        }
        gatherScatterCase(comm, DataType::kInt8, count, size - 1, inPlace);
        allToAllCase(comm, DataType::kFloat32, count, inPlace);
        allToAllCase(comm, DataType::kBFloat16, count, inPlace);
      }
    }
    // Blocks too many for one header in all but each at most 240 bytes: on more than two ranks
    // each travels in one message with the call header (header_framing.h).
    for (bool inPlace : {false, true}) {
      allToAllCase(comm, DataType::kFloat32, 33, inPlace);
      allToAllCase(comm, DataType::kInt64, 29, inPlace);
    }
    asyncCase(comm);
    runVFormMatrix(comm, /*large=*/false);
    for (int round = 0; round < 3; ++round) {
      barrierCase(comm, *store, round + 10 * static_cast<int>(set));
    }
  }
  if (options.large) {
    // A large prime count: many slices of the default size, uneven chunks.
    CommunicatorOptions o;
    o.timeout = 2 * options.timeout;
    o.transport = options.transport;
    o.transportOptions = options.transportOptions;
    o.segmentBytes = options.largeSegmentBytes;
    Bootstrap bootstrap = Bootstrap::forThread(rank, size, store);
    Communicator comm = Communicator::create(bootstrap, o);
    const size_t big = 1000003;
    for (DataType type : kTypes)
      allreduceCase(comm, type, ReduceOp::kSum, big, type == DataType::kInt32);
    for (ReduceOp op : kOps) allreduceCase(comm, DataType::kFloat32, op, big, op == ReduceOp::kMax);
    broadcastCase(comm, DataType::kFloat32, big, size - 1);
    reduceScatterCase(comm, DataType::kFloat32, ReduceOp::kSum, big / size + 1, false);
    allgatherCase(comm, DataType::kFloat32, big / size + 1, true);
    reduceCase(comm, DataType::kFloat32, ReduceOp::kAvg, big, size - 1, false);
    gatherScatterCase(comm, DataType::kFloat64, big / size + 1, 0, false);
    allToAllCase(comm, DataType::kInt32, big / size + 1, false);
    runVFormMatrix(comm, /*large=*/true);
    // Past kernels::kStreamingBytes (8 MiB): final results take the non-temporal path.
    allreduceCase(comm, DataType::kFloat32, ReduceOp::kAvg, 2200003, false);
    allreduceCase(comm, DataType::kInt64, ReduceOp::kSum, 1100003, true);

    // The log-step algorithms with buffers larger than a link's largest message (shm slots of
    // 8 KiB; the in-process transport's 1 MiB): sliced exchanges that reduce as slices arrive,
    // scratch buffers reused across calls.
    o.algorithms = algorithmSets[1];
    o.transportOptions["shm_bytes"] = "64K";
    Communicator sliced = Communicator::create(bootstrap, o);
    const size_t count = 300007;  // 1.2 MB of float32
    for (bool inPlace : {false, true}) {
      allreduceCase(sliced, DataType::kFloat32, ReduceOp::kSum, count, inPlace);
      allreduceCase(sliced, DataType::kFloat32, ReduceOp::kAvg, count, inPlace);
      allreduceCase(sliced, DataType::kInt64, ReduceOp::kMax, count, inPlace);
      allgatherCase(sliced, DataType::kFloat32, count / size + 1, inPlace);
      reduceCase(sliced, DataType::kFloat32, ReduceOp::kSum, count, size - 1, inPlace);
      gatherScatterCase(sliced, DataType::kFloat32, count / size + 1, 0, inPlace);
      allToAllCase(sliced, DataType::kFloat32, count / size + 1, inPlace);
    }
    // Recursive halving and doubling the same way, and the linear gather and scatter (v-forms
    // too); the all-gather's result past kernels::kStreamingBytes, which a folded rank receives
    // with non-temporal stores.
    CommunicatorOptions halvingOptions = o;
    halvingOptions.algorithms = algorithmSets[2];
    Communicator halving = Communicator::create(bootstrap, halvingOptions);
    for (bool inPlace : {false, true}) {
      reduceScatterCase(halving, DataType::kFloat32, ReduceOp::kSum, count / size + 1, inPlace);
      reduceScatterCase(halving, DataType::kFloat32, ReduceOp::kAvg, count / size + 1, inPlace);
      reduceScatterCase(halving, DataType::kInt64, ReduceOp::kMax, count / size + 1, inPlace);
      allgatherCase(halving, DataType::kFloat32, count / size + 1, inPlace);
      gatherScatterCase(halving, DataType::kFloat32, count / size + 1, size - 1, inPlace);
    }
    allgatherCase(halving, DataType::kFloat32, 2200003 / size + 1, false);
    runVFormLargeCases(halving);
    // The trees past kernels::kStreamingBytes: a broadcast's receiver copies into its buffer
    // with non-temporal stores, and the reduce's root takes its first child's data reduced with
    // its input straight into recv.
    o.transportOptions.erase("shm_bytes");
    Communicator trees = Communicator::create(bootstrap, o);
    const size_t past = 2200003;  // 8.8 MB of float32
    reduceCase(trees, DataType::kFloat32, ReduceOp::kAvg, past, 0, false);
    reduceCase(trees, DataType::kFloat32, ReduceOp::kSum, past, size - 1, true);
    broadcastCase(trees, DataType::kFloat32, past, size - 1);
    // Blocks that shared memory lends (Link::lend, 16 KiB up to 1 MiB: the receiver reads them
    // out of the sender's buffer): the linear scatter's root lends every block at once, the
    // tree's root and leaves one subtree at a time. 600 KB blocks are two messages of a 512 KiB
    // slice, both lent.
    for (const char* schedule : {"linear", "tree"}) {
      CommunicatorOptions lending = o;
      lending.segmentBytes = size_t{512} << 10;
      lending.algorithms = {{"gather", schedule}, {"scatter", schedule}};
      Communicator lent = Communicator::create(bootstrap, lending);
      for (const size_t count : {size_t{16} << 10, size_t{150001}}) {
        for (const int root : {0, size - 1}) {
          for (bool inPlace : {false, true}) {
            gatherScatterCase(lent, DataType::kFloat32, count, root, inPlace);
          }
        }
      }
    }
  }
}

}  // namespace ringlet::testing
