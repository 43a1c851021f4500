// Ring all-reduce = reduce-scatter, then all-gather: 2(N-1) steps.
//
// The buffer is cut into N chunks (collectives/chunking.h; uneven counts give the first
// count % N chunks one extra element). Rank r sends to r+1 and receives from r-1. At step s of
// the reduce-scatter, rank r sends chunk r-s and receives chunk r-s-1, adding its own input to
// it; after N-1 steps rank r holds chunk r+1 fully reduced. The all-gather then passes the
// finished chunks once around the ring. For N = 4 (chunks 0..3; "3<" = receives chunk 3):
//
//   step  phase            rank 0      rank 1      rank 2      rank 3
//   1     reduce-scatter   0> 3<       1> 0<       2> 1<       3> 2<
//   2     reduce-scatter   3> 2<       0> 3<       1> 0<       2> 1<
//   3     reduce-scatter   2> 1<=      3> 2<=      0> 3<=      1> 0<=   (= fully reduced)
//   4     all-gather       1> 0<       2> 1<       3> 2<       0> 3<
//   5     all-gather       0> 3<       1> 0<       2> 1<       3> 2<
//   6     all-gather       3> 2<       0> 3<       1> 0<       2> 1<
//
// Every rank sends and receives 2(N-1) chunks: 2(N-1)/N of the buffer each way (the "bus
// bandwidth" factor), whatever N is.
//
// Pipelining: each chunk is cut into slices, and the whole schedule runs slice by slice, so
// while rank r reduces slice k its neighbours already move slice k+1. Per slice the steps become
// the primitives below (as in NCCL); the loop body mirrors the table row by row:
//
//   send                 step 1      chunk r       input -> next
//   recvReduceSend       steps 2..N-1 chunk r-s    prev + input -> next
//   recvReduceCopySend   step N      chunk r+1     prev + input -> output (final) -> next
//   recvCopySend         steps N+1..2N-2           prev -> output -> next
//   recv                 step 2N-1  chunk r+2      prev -> output
//
// (Steps here count primitives, one more than the table's rows: the first send starts row 1
// and the last receive ends row 2N-2.)
//
// Zero copy: a receive reduces straight out of the transport's buffer (Link::recv), and a send
// goes straight into the transport's slot when it has one (shared memory) or straight from the
// output buffer otherwise (TCP). Over shared memory the final reduction writes the peer's slot
// and the output in one pass, and large buffers get their output written with non-temporal
// stores, since nothing reads it again during the call (reduce.h: kStreamingBytes). Partial sums
// travel through output chunks that the all-gather overwrites later, which is safe even in place: a
// chunk comes back only after the whole ring has consumed what this rank sent from it.
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "collectives/reduce.h"

namespace ringlet::collectives {
namespace {

class RingAllreduce {
 public:
  RingAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                const WaitContext& wait)
      : group_(group),
        args_(args),
        wait_(wait),
        next_(group.next()),
        prev_(group.prev()),
        elementBytes_(elementSize(args.type)),
        sliceElements_(std::max<size_t>(1, sliceBytes / elementBytes_)),
        streaming_(args.count * elementBytes_ >= kStreamingBytes) {}

  void run() {
    const int n = group_.size;
    const int r = group_.rank;
    const size_t slices = sliceCount(args_.count, n, sliceElements_);
    for (size_t k = 0; k < slices; ++k) {
      send(piece(r, k));
      for (int s = 1; s <= n - 2; ++s) recvReduceSend(piece(r - s, k));
      recvReduceCopySend(piece(r + 1, k));
      for (int s = 1; s <= n - 2; ++s) recvCopySend(piece(r + 1 - s, k));
      recv(piece(r + 2, k));
    }
    next_.flush(wait_);
  }

 private:
  Piece piece(int chunk, size_t slice) const {
    return sliceOf(evenChunk(args_.count, group_.size, wrap(chunk, group_.size)), slice,
                   sliceElements_);
  }
  size_t bytes(const Piece& p) const { return p.count * elementBytes_; }
  const std::byte* input(const Piece& p) const { return args_.send + p.offset * elementBytes_; }
  std::byte* output(const Piece& p) const { return args_.recv + p.offset * elementBytes_; }

  void send(const Piece& p) { sendFrom(next_, input(p), bytes(p), wait_); }

  void recvReduceSend(const Piece& p) {
    const std::byte* in = prev_.recv(bytes(p), wait_);
    std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
    reduce(out, input(p), in, p.count, args_.type, args_.op);
    next_.send(out, bytes(p), wait_);
    prev_.release();
  }

  void recvReduceCopySend(const Piece& p) {
    const std::byte* in = prev_.recv(bytes(p), wait_);
    if (next_.sharesMemory()) {
      // One pass: the sum goes to the next rank's slot and to the output together.
      std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
      if (streaming_) {
        reduceStreaming(output(p), out, input(p), in, p.count, args_.type, args_.op, group_.size);
      } else {
        reduce(out, input(p), in, p.count, args_.type, args_.op);
        if (args_.op == ReduceOp::kAvg) finishAverage(out, p.count, args_.type, group_.size);
        std::memcpy(output(p), out, bytes(p));
      }
      prev_.release();
      next_.send(out, bytes(p), wait_);
      return;
    }
    reduce(output(p), input(p), in, p.count, args_.type, args_.op);
    prev_.release();
    if (args_.op == ReduceOp::kAvg) finishAverage(output(p), p.count, args_.type, group_.size);
    sendFrom(next_, output(p), bytes(p), wait_);
  }

  void recvCopySend(const Piece& p) {
    if (prev_.sharesMemory()) {
      // Read the incoming slot once, into the output and the next rank's slot.
      const std::byte* in = prev_.recv(bytes(p), wait_);
      std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
      copyOut(output(p), in, bytes(p));
      if (out != output(p)) std::memcpy(out, in, bytes(p));
      prev_.release();
      next_.send(out, bytes(p), wait_);
      return;
    }
    prev_.recvInto(output(p), bytes(p), wait_);
    sendFrom(next_, output(p), bytes(p), wait_);
  }

  void recv(const Piece& p) {
    if (streaming_ && prev_.sharesMemory()) {
      const std::byte* in = prev_.recv(bytes(p), wait_);
      streamCopy(output(p), in, bytes(p));
      prev_.release();
      return;
    }
    prev_.recvInto(output(p), bytes(p), wait_);
  }

  void copyOut(std::byte* dst, const std::byte* src, size_t n) const {
    if (streaming_) {
      streamCopy(dst, src, n);
    } else if (n > 0) {
      std::memcpy(dst, src, n);
    }
  }

  const Group& group_;
  const AllreduceArgs& args_;
  const WaitContext& wait_;
  Link& next_;
  Link& prev_;
  const size_t elementBytes_;
  const size_t sliceElements_;
  const bool streaming_;
};

}  // namespace

void sendFrom(Link& link, const std::byte* data, size_t bytes, const WaitContext& wait) {
  // The transport never writes through `scratch`; it only hands it back.
  std::byte* out = link.sendBuffer(bytes, const_cast<std::byte*>(data), wait);
  if (out != data && bytes > 0) std::memcpy(out, data, bytes);
  link.send(out, bytes, wait);
}

void ringAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  RingAllreduce(group, args, sliceBytes, wait).run();
}

}  // namespace ringlet::collectives
