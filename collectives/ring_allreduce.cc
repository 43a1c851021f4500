// Ring all-reduce over transport Links: the primitives of the shared schedule
// (ring_schedule.h, where the N = 4 table and the pipelining are drawn) on host memory.
//
// Zero copy: a receive reduces straight out of the transport's buffer (Link::recv), and a send
// goes straight into the transport's slot when it has one (shared memory) or straight from the
// output buffer otherwise (TCP). Over shared memory the final reduction writes the peer's slot
// and the output in one pass, and large buffers get their output written with non-temporal
// stores, since nothing reads it again during the call (reduce.h: kStreamingBytes).
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

using kernels::finishAverage;
using kernels::kStreamingBytes;
using kernels::reduce;
using kernels::reduceStreaming;
using kernels::streamCopy;
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
    ringAllreduceSchedule(*this, group_.rank, group_.size, args_.count, sliceElements_);
    next_.flush(wait_);
  }

  // ---- the primitives (ring_schedule.h) ----
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

 private:
  size_t bytes(const Piece& p) const { return p.count * elementBytes_; }
  const std::byte* input(const Piece& p) const { return args_.send + p.offset * elementBytes_; }
  std::byte* output(const Piece& p) const { return args_.recv + p.offset * elementBytes_; }

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
