// One rank of a soak run (scripts/soak.py): a seeded random sequence of collectives (operation,
// count, data type, root) that every rank derives alike, each result checked element by element,
// and optionally one rank that SIGKILLs itself at a random point of a given call. The operations:
// every collective, the v-forms with uneven counts (some blocks empty), sendrecv as a ring shift,
// an all-reduce and a broadcast in flight at once (async), and a split whose halves all-reduce.
//
//   soak_rank SEED CALLS KILL_RANK KILL_CALL     (KILL_RANK -1: nobody dies)
//
// Prints one line and exits: "soak: rank R ok calls=N" (0), "soak: rank R named error TYPE: ..."
// (3), "soak: rank R WRONG ..." (4), "soak: rank R leaked fds A->B threads C->D" (5). The fd and
// thread counts are taken before the bootstrap and after the communicator and store are gone.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

using namespace ringlet;

namespace {

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Element j of rank r's data for call c: small integers, exact in every type used.
int64_t value(size_t j, int r, int c) {
  return static_cast<int64_t>((j * 7 + static_cast<size_t>(r) * 3 + static_cast<size_t>(c)) % 61) +
         1;
}

enum class Op {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kGather,
  kScatter,
  kAllToAll,
  kBarrier,
  kAllgatherv,
  kReduceScatterv,
  kGatherv,
  kScatterv,
  kAllToAllv,
  kSendrecv,
  kAsyncPair,
  kSplit,
  kCount
};
const char* kOpNames[] = {"allreduce",      "broadcast", "reduce",   "allgather", "reduceScatter",
                          "gather",         "scatter",   "allToAll", "barrier",   "allgatherv",
                          "reduceScatterv", "gatherv",   "scatterv", "allToAllv", "sendrecv",
                          "asyncPair",      "split"};
static_assert(std::size(kOpNames) == static_cast<size_t>(Op::kCount));

struct Call {
  Op op;
  size_t count;
  DataType type;
  ReduceOp reduce;
  int root;
  uint64_t shape;  // the v-forms' uneven counts derive from it, alike on every rank
};

// The v-forms' count for the pair (from, to) of a call: zero, a few, or around `count`, so
// blocks differ between ranks, some empty.
size_t unevenCount(const Call& call, int from, int to) {
  const uint64_t h = (call.shape ^ (static_cast<uint64_t>(from) * 0x9e3779b97f4a7c15ULL) ^
                      (static_cast<uint64_t>(to) * 0xc2b2ae3d27d4eb4fULL)) *
                     0xff51afd7ed558ccdULL;
  switch ((h >> 33) % 5) {
    case 0:
      return 0;
    case 1:
      return 1 + (h >> 40) % 7;
    case 2:
      return call.count / 2;
    case 3:
      return call.count + 3;
    default:
      return call.count;
  }
}

int64_t combine(ReduceOp op, int64_t a, int64_t b) {
  switch (op) {
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    default:
      return a + b;
  }
}

int64_t reduced(ReduceOp op, size_t j, int size, int c) {
  int64_t acc = value(j, 0, c);
  for (int r = 1; r < size; ++r) acc = combine(op, acc, value(j, r, c));
  return acc;
}

// Blocks of a v-form in rank order: each rank's count and where its block starts.
struct Blocks {
  std::vector<size_t> counts, offsets;  // offsets: one more, the total last

  template <typename CountOf>
  Blocks(int size, CountOf countOf) : offsets{0} {
    for (int r = 0; r < size; ++r) {
      counts.push_back(countOf(r));
      offsets.push_back(offsets.back() + counts.back());
    }
  }
  size_t count(int r) const { return counts[static_cast<size_t>(r)]; }
  size_t total() const { return offsets.back(); }
  // The rank whose block holds element i.
  int owner(size_t i) const {
    int r = 0;
    while (offsets[static_cast<size_t>(r) + 1] <= i) ++r;
    return r;
  }
};

struct Wrong {
  std::string what;
};

template <typename T>
void runCall(Communicator& comm, const Call& call, int c) {
  const int rank = comm.rank(), size = comm.size();
  const size_t n = call.count, ranks = static_cast<size_t>(size), all = n * ranks;
  auto fill = [&](std::vector<T>& v, int r) {
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<T>(value(j, r, c));
  };
  auto check = [&](const std::vector<T>& got, auto expected) {
    for (size_t j = 0; j < got.size(); ++j) {
      const int64_t want = expected(j);
      if (static_cast<int64_t>(got[j]) != want) {
        throw Wrong{std::string(kOpNames[static_cast<int>(call.op)]) + " call " +
                    std::to_string(c) + " element " + std::to_string(j) + ": got " +
                    std::to_string(static_cast<int64_t>(got[j])) + ", want " +
                    std::to_string(want)};
      }
    }
  };
  std::vector<T> send, recv;
  switch (call.op) {
    case Op::kAllreduce:
      send.resize(n), recv.resize(n), fill(send, rank);
      comm.allreduce(send.data(), recv.data(), n, call.type, call.reduce);
      check(recv, [&](size_t j) { return reduced(call.reduce, j, size, c); });
      break;
    case Op::kBroadcast:
      send.resize(n), fill(send, rank == call.root ? call.root : rank + 100);
      comm.broadcast(send.data(), n, call.type, call.root);
      check(send, [&](size_t j) { return value(j, call.root, c); });
      break;
    case Op::kReduce:
      send.resize(n), recv.resize(n), fill(send, rank);
      comm.reduce(send.data(), recv.data(), n, call.type, call.reduce, call.root);
      if (rank == call.root)
        check(recv, [&](size_t j) { return reduced(call.reduce, j, size, c); });
      break;
    case Op::kAllgather:
      send.resize(n), recv.resize(all), fill(send, rank);
      comm.allgather(send.data(), recv.data(), n, call.type);
      check(recv, [&](size_t i) {
        return value(i % std::max<size_t>(n, 1), int(i / std::max<size_t>(n, 1)), c);
      });
      break;
    case Op::kReduceScatter:
      send.resize(all), recv.resize(n), fill(send, rank);
      comm.reduceScatter(send.data(), recv.data(), n, call.type, call.reduce);
      check(recv, [&](size_t j) { return reduced(call.reduce, size_t(rank) * n + j, size, c); });
      break;
    case Op::kGather:
      send.resize(n), recv.resize(rank == call.root ? all : 0), fill(send, rank);
      comm.gather(send.data(), rank == call.root ? recv.data() : nullptr, n, call.type, call.root);
      if (rank == call.root) {
        check(recv, [&](size_t i) {
          return value(i % std::max<size_t>(n, 1), int(i / std::max<size_t>(n, 1)), c);
        });
      }
      break;
    case Op::kScatter:
      send.resize(rank == call.root ? all : 0), recv.resize(n);
      if (rank == call.root) fill(send, call.root);
      comm.scatter(rank == call.root ? send.data() : nullptr, recv.data(), n, call.type, call.root);
      check(recv, [&](size_t j) { return value(size_t(rank) * n + j, call.root, c); });
      break;
    case Op::kAllToAll:
      send.resize(all), recv.resize(all), fill(send, rank);
      comm.allToAll(send.data(), recv.data(), n, call.type);
      // Block q of the result is block `rank` of rank q's data.
      check(recv, [&](size_t i) {
        const size_t q = i / std::max<size_t>(n, 1), j = i % std::max<size_t>(n, 1);
        return value(size_t(rank) * n + j, int(q), c);
      });
      break;
    case Op::kAllgatherv:
    case Op::kGatherv: {
      const Blocks blocks(size, [&](int r) { return unevenCount(call, r, r); });
      const bool gets = call.op == Op::kAllgatherv || rank == call.root;
      send.resize(blocks.count(rank)), recv.resize(gets ? blocks.total() : 0), fill(send, rank);
      if (call.op == Op::kAllgatherv) {
        comm.allgatherv(send.data(), recv.data(), blocks.counts, call.type);
      } else {
        comm.gatherv(send.data(), gets ? recv.data() : nullptr, blocks.counts, call.type,
                     call.root);
      }
      if (gets) {
        check(recv, [&](size_t i) {
          const int r = blocks.owner(i);
          return value(i - blocks.offsets[size_t(r)], r, c);
        });
      }
      break;
    }
    case Op::kReduceScatterv: {
      const Blocks blocks(size, [&](int r) { return unevenCount(call, r, r); });
      const size_t before = blocks.offsets[size_t(rank)];
      send.resize(blocks.total()), recv.resize(blocks.count(rank)), fill(send, rank);
      comm.reduceScatterv(send.data(), recv.data(), blocks.counts, call.type, call.reduce);
      check(recv, [&](size_t j) { return reduced(call.reduce, before + j, size, c); });
      break;
    }
    case Op::kScatterv: {
      const Blocks blocks(size, [&](int r) { return unevenCount(call, r, r); });
      const size_t before = blocks.offsets[size_t(rank)];
      send.resize(rank == call.root ? blocks.total() : 0), recv.resize(blocks.count(rank));
      if (rank == call.root) fill(send, call.root);
      comm.scatterv(rank == call.root ? send.data() : nullptr, blocks.counts, recv.data(),
                    call.type, call.root);
      check(recv, [&](size_t j) { return value(before + j, call.root, c); });
      break;
    }
    case Op::kAllToAllv: {
      // Rank p's block for q holds value(q * 100003 + j, p, c).
      const Blocks sends(size, [&](int q) { return unevenCount(call, rank, q); });
      const Blocks recvs(size, [&](int q) { return unevenCount(call, q, rank); });
      for (int q = 0; q < size; ++q) {
        for (size_t j = 0; j < sends.count(q); ++j) {
          send.push_back(static_cast<T>(value(size_t(q) * 100003 + j, rank, c)));
        }
      }
      recv.resize(recvs.total());
      comm.allToAllv(send.data(), sends.counts, recv.data(), recvs.counts, call.type);
      check(recv, [&](size_t i) {
        const int q = recvs.owner(i);
        return value(size_t(rank) * 100003 + (i - recvs.offsets[size_t(q)]), q, c);
      });
      break;
    }
    case Op::kSendrecv: {
      // A ring shift by 1..size-1 places (point-to-point to oneself is refused, as in
      // torch.distributed): each rank sends to rank + shift, receives from rank - shift.
      const int shift = 1 + call.root % std::max(size - 1, 1), dest = (rank + shift) % size,
                source = (rank - shift + size) % size;
      send.resize(n), recv.resize(n), fill(send, rank);
      comm.sendrecv(send.data(), n, dest, recv.data(), n, source, call.type, c);
      check(recv, [&](size_t j) { return value(j, source, c); });
      break;
    }
    case Op::kAsyncPair: {
      // Two collectives in flight at once: an all-reduce, then a broadcast, waited in reverse.
      std::vector<T> bcast(n);
      send.resize(n), recv.resize(n), fill(send, rank);
      fill(bcast, rank == call.root ? call.root : rank + 100);
      Work sum = comm.allreduceAsync(send.data(), recv.data(), n, call.type, call.reduce);
      Work from = comm.broadcastAsync(bcast.data(), n, call.type, call.root);
      from.wait();
      sum.wait();
      check(recv, [&](size_t j) { return reduced(call.reduce, j, size, c); });
      check(bcast, [&](size_t j) { return value(j, call.root, c); });
      break;
    }
    case Op::kSplit: {
      // Two sub-communicators (even and odd ranks, ranked in reverse) each all-reduce, then
      // end; the parent goes on.
      std::optional<Communicator> sub = comm.split(rank % 2, size - rank);
      const int subSize = sub->size();
      send.resize(n), recv.resize(n), fill(send, rank);
      sub->allreduce(send.data(), recv.data(), n, call.type, call.reduce);
      check(recv, [&](size_t j) {
        int64_t acc = value(j, rank % 2, c);
        for (int r = rank % 2 + 2; r < size; r += 2)
          acc = combine(call.reduce, acc, value(j, r, c));
        return acc;
      });
      if (sub->rank() != (subSize - 1 - rank / 2))
        throw Wrong{"split: rank " + std::to_string(sub->rank())};
      break;
    }
    default:
      comm.barrier();
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: soak_rank SEED CALLS KILL_RANK KILL_CALL\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const int calls = std::atoi(argv[2]), killRank = std::atoi(argv[3]),
            killCall = std::atoi(argv[4]);
  const int fdsBefore = countEntries("/proc/self/fd"),
            threadsBefore = countEntries("/proc/self/task");
  int rank = -1;
  int status = 0;
  std::string line;
  bool killScheduled = false;
  {
    try {
      Bootstrap bootstrap = Bootstrap::fromEnvironment();
      rank = bootstrap.rank;
      Communicator comm = Communicator::create(bootstrap);
      std::mt19937_64 random(seed);
      constexpr size_t kCounts[] = {0, 1, 2, 7, 64, 1000, 4099, 65537, 300001};
      constexpr DataType kTypes[] = {DataType::kInt32, DataType::kInt64, DataType::kFloat32,
                                     DataType::kFloat64};
      constexpr ReduceOp kReduces[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax};
      for (int c = 0; c < calls; ++c) {
        Call call{static_cast<Op>(random() % static_cast<int>(Op::kCount)),
                  kCounts[random() % std::size(kCounts)],
                  kTypes[random() % std::size(kTypes)],
                  kReduces[random() % std::size(kReduces)],
                  static_cast<int>(random() % comm.size()),
                  random()};
        const auto delay = std::chrono::microseconds(random() % 3000);
        if (rank == killRank && c == killCall) {
          killScheduled = true;
          std::thread([delay] {
            std::this_thread::sleep_for(delay);
            kill(getpid(), SIGKILL);
          }).detach();
        }
        switch (call.type) {
          case DataType::kInt32:
            runCall<int32_t>(comm, call, c);
            break;
          case DataType::kInt64:
            runCall<int64_t>(comm, call, c);
            break;
          case DataType::kFloat32:
            runCall<float>(comm, call, c);
            break;
          default:
            runCall<double>(comm, call, c);
            break;
        }
      }
      comm.barrier();
      line = "ok calls=" + std::to_string(calls);
    } catch (const Wrong& w) {
      line = "WRONG " + w.what;
      status = 4;
    } catch (const PeerError& e) {
      line = std::string("named error PeerError: ") + e.what(), status = 3;
    } catch (const TimeoutError& e) {
      line = std::string("named error TimeoutError: ") + e.what(), status = 3;
    } catch (const AbortedError& e) {
      line = std::string("named error AbortedError: ") + e.what(), status = 3;
    } catch (const MismatchError& e) {
      line = std::string("named error MismatchError: ") + e.what(), status = 3;
    } catch (const Error& e) {
      line = std::string("named error Error: ") + e.what(), status = 3;
    }
  }
  if (killScheduled) {
    // The rank about to die may see its own links fail first, or finish its calls before the
    // kill comes (its killer thread would count as a leak): wait for the kill.
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  const int fdsAfter = countEntries("/proc/self/fd"),
            threadsAfter = countEntries("/proc/self/task");
  if (status != 4 && (fdsAfter != fdsBefore || threadsAfter != threadsBefore)) {
    line += " | leaked fds " + std::to_string(fdsBefore) + "->" + std::to_string(fdsAfter) +
            " threads " + std::to_string(threadsBefore) + "->" + std::to_string(threadsAfter);
    status = 5;
  }
  std::printf("soak: rank %d %s\n", rank, line.c_str());
  std::fflush(stdout);
  return status;
}
