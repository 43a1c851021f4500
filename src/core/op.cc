#include "src/core/op.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "collectives/select.h"

namespace ringlet::detail {
namespace {
constexpr uint32_t kMagic = 0x524c4f50;  // "RLOP"
}

std::array<std::byte, OpHeader::kWireBytes> OpHeader::encode() const {
  std::array<std::byte, kWireBytes> out{};
  encodeTo(out.data());
  return out;
}

void OpHeader::encodeTo(std::byte* p) const {
  std::memset(p, 0, kFieldBytes);
  std::memcpy(p, &kMagic, 4);
  p[4] = static_cast<std::byte>(kind);
  p[5] = static_cast<std::byte>(type);
  p[6] = static_cast<std::byte>(op);
  p[7] = static_cast<std::byte>(memory);
  std::memcpy(p + 8, &root, 4);
  std::memcpy(p + 12, &tag, 4);
  std::memcpy(p + 16, &count, 8);
  std::memcpy(p + 24, &seq, 8);
  std::memcpy(p + 32, &countsHash, 8);
  std::memcpy(p + 40, &ranks, 4);
  p[44] = static_cast<std::byte>(algorithm);
  if (inlineBytes > 0) copySmall(p + kFieldBytes, inlineData, std::min(inlineBytes, kInlineBytes));
}

bool OpHeader::decode(const std::byte* data, OpHeader& out) {
  uint32_t magic = 0;
  std::memcpy(&magic, data, 4);
  if (magic != kMagic) return false;
  out.kind = static_cast<OpKind>(data[4]);
  out.type = static_cast<DataType>(data[5]);
  out.op = static_cast<ReduceOp>(data[6]);
  out.memory = static_cast<uint8_t>(data[7]);
  std::memcpy(&out.root, data + 8, 4);
  std::memcpy(&out.tag, data + 12, 4);
  std::memcpy(&out.count, data + 16, 8);
  std::memcpy(&out.seq, data + 24, 8);
  std::memcpy(&out.countsHash, data + 32, 8);
  std::memcpy(&out.ranks, data + 40, 4);
  out.algorithm = static_cast<uint8_t>(data[44]);
  return true;
}

void copyOutOfLine(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

std::string_view OpHeader::name() const {
  switch (kind) {
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kProbe:
      return "probe";
    case OpKind::kSendRecv:
      return "sendrecv";
    case OpKind::kDeviceSetup:
      return "cuda-setup";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kAllgather:
      return "allgather";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kGather:
      return "gather";
    case OpKind::kScatter:
      return "scatter";
    case OpKind::kAllToAll:
      return "alltoall";
    case OpKind::kAllgatherv:
      return "allgatherv";
    case OpKind::kReduceScatterv:
      return "reduce_scatterv";
    case OpKind::kAllToAllv:
      return "alltoallv";
    case OpKind::kGatherv:
      return "gatherv";
    case OpKind::kScatterv:
      return "scatterv";
    case OpKind::kCalibrate:
      return "calibrate";
    case OpKind::kClockOffset:
      return "clock_offset";
    case OpKind::kSplit:
      return tag == kSplitIsDup ? "dup" : "split";
  }
  return "unknown-op";
}

std::string OpHeader::describeCall() const {
  const char* where = memory == 1 ? ", cuda memory" : "";
  switch (kind) {
    case OpKind::kAllreduce:
      return fmt::format("allreduce(count={}, {}, {}{})", count, toString(type), toString(op),
                         where);
    case OpKind::kBroadcast:
      return fmt::format("broadcast(count={}, {}, root={}{})", count, toString(type), root, where);
    case OpKind::kDeviceSetup:
      return "cuda setup (first collective of a DeviceCommunicator)";
    case OpKind::kReduce:
      return fmt::format("reduce(count={}, {}, {}, root={}{})", count, toString(type), toString(op),
                         root, where);
    case OpKind::kAllgather:
      return fmt::format("allgather(count={} per rank, {}{})", count, toString(type), where);
    case OpKind::kReduceScatter:
      return fmt::format("reduce_scatter(count={} per rank, {}, {}{})", count, toString(type),
                         toString(op), where);
    case OpKind::kGather:
      return fmt::format("gather(count={} per rank, {}, root={}{})", count, toString(type), root,
                         where);
    case OpKind::kAllToAll:
      return fmt::format("alltoall(count={} per pair, {}{})", count, toString(type), where);
    case OpKind::kScatter:
      return fmt::format("scatter(count={} per rank, {}, root={}{})", count, toString(type), root,
                         where);
    case OpKind::kAllgatherv:
      return fmt::format("allgatherv(count={} in all over {} ranks, {}, counts #{:016x}{})", count,
                         ranks, toString(type), countsHash, where);
    case OpKind::kReduceScatterv:
      return fmt::format(
          "reduce_scatterv(count={} in all over {} ranks, {}, {}, counts #{:016x}{})", count, ranks,
          toString(type), toString(op), countsHash, where);
    case OpKind::kAllToAllv:
      if (countsHash != 0) {  // two ranks: the pair's counts travel as a fingerprint
        return fmt::format("alltoallv(sends {} in all over {} ranks, {}, pair counts #{:016x}{})",
                           count, ranks, toString(type), countsHash, where);
      }
      return fmt::format("alltoallv(sends {} in all over {} ranks, {}{})", count, ranks,
                         toString(type), where);
    case OpKind::kGatherv:
    case OpKind::kScatterv:
      return fmt::format("{}(count={} in all over {} ranks, {}, root={}, counts #{:016x}{})",
                         name(), count, ranks, toString(type), root, countsHash, where);
    case OpKind::kSplit:
      if (tag == kSplitIsDup) return "dup()";
      return fmt::format("split(color={}, key={})", root, static_cast<int64_t>(count));
    case OpKind::kBarrier:
      return "barrier()";
    case OpKind::kCalibrate:
      return "cost-model calibration (inside Communicator::create, or recalibrate())";
    case OpKind::kClockOffset:
      return "trace mode's clock exchange (inside Communicator::create; RINGLET_TRACE on every "
             "rank or none)";
    case OpKind::kSend:
      return fmt::format("send(count={}, {}, to rank {}, tag={})", count, toString(type), root,
                         tag);
    case OpKind::kRecv: {
      // A recv from any source has no root; tryRecv's look at one rank names it in `source`.
      const int from = root >= 0 ? root : source;
      return fmt::format("recv(count={}, {}, from {}, tag={})", count, toString(type),
                         from >= 0 ? fmt::format("rank {}", from) : std::string("any rank"), tag);
    }
    case OpKind::kProbe: {
      const int from = root >= 0 ? root : source;
      return fmt::format("probe(from {}, tag={})",
                         from >= 0 ? fmt::format("rank {}", from) : std::string("any rank"), tag);
    }
    case OpKind::kSendRecv:
      return fmt::format("sendrecv(count={} to rank {}, count={} from rank {}, {}, tag={})", count,
                         root, recvCount, source, toString(type), tag);
  }
  return fmt::format("unknown operation {}", static_cast<int>(kind));
}

bool OpHeader::sameCall(const OpHeader& o) const {
  if (kind != o.kind || seq != o.seq || memory != o.memory || algorithm != o.algorithm) {
    return false;
  }
  switch (kind) {
    case OpKind::kDeviceSetup:
    case OpKind::kCalibrate:
    case OpKind::kClockOffset:
      return true;
    case OpKind::kAllreduce:
    case OpKind::kReduceScatter:
      return count == o.count && type == o.type && op == o.op;
    case OpKind::kReduce:
      return count == o.count && type == o.type && op == o.op && root == o.root;
    case OpKind::kAllgather:
    case OpKind::kAllToAll:
      return count == o.count && type == o.type;
    case OpKind::kGather:
    case OpKind::kScatter:
      return count == o.count && type == o.type && root == o.root;
    case OpKind::kBroadcast:
      return count == o.count && type == o.type && root == o.root;
    case OpKind::kAllgatherv:
      return count == o.count && type == o.type && ranks == o.ranks && countsHash == o.countsHash;
    case OpKind::kReduceScatterv:
      return count == o.count && type == o.type && op == o.op && ranks == o.ranks &&
             countsHash == o.countsHash;
    case OpKind::kAllToAllv:  // each rank's total differs; two ranks fingerprint their pair
      return type == o.type && ranks == o.ranks && countsHash == o.countsHash;
    case OpKind::kGatherv:
    case OpKind::kScatterv:
      return count == o.count && type == o.type && root == o.root && ranks == o.ranks &&
             countsHash == o.countsHash;
    case OpKind::kBarrier:
      return true;
    case OpKind::kSplit:  // colors and keys differ between ranks; split and dup do not match
      return tag == o.tag;
    case OpKind::kSend:
    case OpKind::kRecv:
      return count == o.count && type == o.type && tag == o.tag;
    case OpKind::kSendRecv:  // never compared: its messages carry kSend headers
    case OpKind::kProbe:     // never on the wire
      return false;
  }
  return false;
}

uint64_t hashCounts(std::span<const size_t> counts) {
  // Each count through splitmix64's finalizer (a bijection that mixes every bit into every
  // other), chained: the fingerprint of ranks that disagree by mistake, not a guard against a
  // peer that lies (a hostile peer can send any header). SHA-256 did the same with a digest
  // context per call; with it gone (and the gather-v body held in place) a two-rank 120-byte
  // gather-v went from 0.18-0.19 to 0.09-0.10 us.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t hash = mix(0x6a09e667f3bcc908ULL ^ counts.size());
  for (size_t count : counts) hash = mix(hash ^ mix(count + 0x9e3779b97f4a7c15ULL));
  return hash;
}

std::string describeMismatch(const std::string& where, int rank, const OpHeader& mine, int peer,
                             const OpHeader& theirs) {
  auto algorithm = [](const OpHeader& h) {
    return collectives::nameOf(static_cast<collectives::Algorithm>(h.algorithm));
  };
  if (mine.kind == theirs.kind && mine.algorithm != theirs.algorithm &&
      mine.describeCall() == theirs.describeCall()) {
    return fmt::format(
        "{}: ranks disagree about call #{}: {} runs the {} algorithm on rank {} but {} on rank "
        "{}; RINGLET_ALGO (CommunicatorOptions::algorithms) must be the same on every rank",
        where, mine.seq, mine.describeCall(), algorithm(mine), rank, algorithm(theirs), peer);
  }
  return fmt::format(
      "{}: ranks disagree about call #{}: rank {} called {} (call #{}) but rank {} called {} "
      "(call #{}); every rank must issue the same collectives in the same order",
      where, mine.seq, rank, mine.describeCall(), mine.seq, peer, theirs.describeCall(),
      theirs.seq);
}

}  // namespace ringlet::detail
