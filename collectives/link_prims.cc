#include "collectives/link_prims.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace ringlet::collectives {

using kernels::finishAverage;
using kernels::reduce;
using kernels::reduceStreaming;
using kernels::streamCopy;

LinkPrims::LinkPrims(Link& prev, Link& next, const std::byte* input, std::byte* output,
                     size_t elementBytes, DataType type, ReduceOp op, int divisor, bool streaming,
                     const WaitContext& wait)
    : prev_(prev),
      next_(next),
      input_(input),
      output_(output),
      elementBytes_(elementBytes),
      type_(type),
      op_(op),
      divisor_(divisor),
      streaming_(streaming),
      wait_(wait) {}

void LinkPrims::send(const Piece& p) {
  trace::StepScope scope(wait_.trace, [&] { return traced("send", p, true, false, false); });
  sendFrom(next_, input(p), bytes(p), wait_);
  settleFirstSend();
}

// A reduction's result for the next rank goes into memory of this rank's own first, then is
// copied into the next rank's slot; it is not reduced straight into the slot. A slot's lines were
// last read by the next rank, so each vector store of a reduction into it waited for that core
// to give the line up, where the copy's string stores do not. On two cores in the state where a
// line costs most to move between them: two ranks, 512 KiB-8 MiB all-reduce (the ring), took 1.8x
// the time straight into the slot, three ranks 1.2-1.4x at 128 KiB-8 MiB (alternating runs
// against the build before); in the other state three-rank calls of 128-512 KiB pay the copy
// (1.2-1.3x) (collectives/README.md). Partial sums are staged in one
// slice of memory kept per thread (in cache; through the whole-size output chunk, 8-32 MiB
// reduce-scatters at N = 3 took 1.07-1.12x the time of reducing into the slot). A final result
// goes to the output, which it must reach anyway, and is copied from there.
void LinkPrims::recvReduceSend(const Piece& p) {
  trace::StepScope scope(wait_.trace,
                         [&] { return traced("recvReduceSend", p, true, true, true); });
  settleFirstSend();
  const std::byte* in = prev_.recv(bytes(p), wait_);
  std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
  if (out == output(p) || p.count == 0) {
    // The transport sends from memory of ours (kept until the flush): reduce into it.
    reduce(out, input(p), in, p.count, type_, op_);
  } else {
    std::byte* staged = scratchBytes(kStagingSlot, bytes(p));
    reduce(staged, input(p), in, p.count, type_, op_);
    next_.fillSendBuffer(out, staged, bytes(p));
  }
  next_.send(out, bytes(p), wait_);
  prev_.release();
}

void LinkPrims::recvReduceCopySend(const Piece& p) {
  trace::StepScope scope(wait_.trace,
                         [&] { return traced("recvReduceCopySend", p, true, true, true); });
  settleFirstSend();
  const std::byte* in = prev_.recv(bytes(p), wait_);
  if (next_.sharesMemory() && streaming_) {
    // One pass: the result goes to the next rank's slot and to the output (non-temporal
    // stores) together. (Past the cache, where the output's copy would come back from memory.)
    std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
    reduceStreaming(output(p), out, input(p), in, p.count, type_, op_, divisor_,
                    next_.streamsIntoSendBuffer());
    prev_.release();
    next_.send(out, bytes(p), wait_);
    return;
  }
  reduce(output(p), input(p), in, p.count, type_, op_);
  prev_.release();
  if (op_ == ReduceOp::kAvg) finishAverage(output(p), p.count, type_, divisor_);
  sendFrom(next_, output(p), bytes(p), wait_);
}

void LinkPrims::recvCopySend(const Piece& p) {
  trace::StepScope scope(wait_.trace, [&] { return traced("recvCopySend", p, true, true, false); });
  settleFirstSend();
  if (prev_.sharesMemory()) {
    // Read the incoming slot once, into the output and the next rank's slot.
    const std::byte* in = prev_.recv(bytes(p), wait_);
    std::byte* out = next_.sendBuffer(bytes(p), output(p), wait_);
    copyOut(output(p), in, bytes(p));
    if (out != output(p) && bytes(p) > 0) next_.fillSendBuffer(out, in, bytes(p));
    prev_.release();
    next_.send(out, bytes(p), wait_);
    return;
  }
  prev_.recvInto(output(p), bytes(p), wait_);
  sendFrom(next_, output(p), bytes(p), wait_);
}

void LinkPrims::recv(const Piece& p) {
  trace::StepScope scope(wait_.trace, [&] { return traced("recv", p, false, true, false); });
  settleFirstSend();
  if (prev_.sharesMemory()) {
    copyOut(output(p), prev_.recv(bytes(p), wait_), bytes(p));
    prev_.release();
    return;
  }
  prev_.recvInto(output(p), bytes(p), wait_);
}

void LinkPrims::recvReduceCopy(const Piece& p) {
  trace::StepScope scope(wait_.trace,
                         [&] { return traced("recvReduceCopy", p, false, true, true); });
  settleFirstSend();
  const std::byte* in = prev_.recv(bytes(p), wait_);
  std::byte* out = finalOutput(p);
  if (streaming_) {
    reduceStreaming(out, nullptr, input(p), in, p.count, type_, op_, divisor_);
  } else {
    reduce(out, input(p), in, p.count, type_, op_);
    if (op_ == ReduceOp::kAvg) finishAverage(out, p.count, type_, divisor_);
  }
  prev_.release();
}

void LinkPrims::traceChunks(size_t count, int chunks, size_t slice) {
  traceCount_ = count;
  traceParts_ = chunks;
  traceSlice_ = std::max<size_t>(slice, 1);
}

void LinkPrims::traceBlocks(std::span<const Piece> blocks, size_t slice) {
  traceBlocks_ = blocks;
  traceSlice_ = std::max<size_t>(slice, 1);
}

trace::Step LinkPrims::traced(const char* name, const Piece& p, bool sends, bool receives,
                              bool reduces) const {
  trace::Step step =
      ringStep(name, p, elementBytes_, sends ? next_.peer() : -1, receives ? prev_.peer() : -1,
               reduces, traceCount_, traceParts_, traceSlice_);
  nameBlock(step, p, traceBlocks_, traceSlice_);
  return step;
}

void LinkPrims::copyOut(std::byte* dst, const std::byte* src, size_t n) const {
  if (streaming_) {
    streamCopy(dst, src, n);
  } else if (n > 0) {
    kernels::copy(dst, src, n);
  }
}

void sendFrom(Link& link, const std::byte* data, size_t bytes, const WaitContext& wait) {
  // The transport never writes through `scratch`; it only hands it back.
  std::byte* out = link.sendBuffer(bytes, const_cast<std::byte*>(data), wait);
  if (out != data && bytes > 0) link.fillSendBuffer(out, data, bytes);
  link.send(out, bytes, wait);
}

}  // namespace ringlet::collectives
