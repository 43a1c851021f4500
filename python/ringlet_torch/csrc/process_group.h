#pragma once
// ProcessGroupRinglet: torch.distributed's "ringlet" backend over one ringlet::Communicator. With
// PyTorch 1.x it is the c10d::ProcessGroup itself; with 2.x a c10d::Backend, which torch wraps in
// a ProcessGroup of its own (`group._get_backend(torch.device("cpu"))` returns it).
//
// Every call checks its tensors and arguments at once (a RuntimeError naming the operation and
// what is wrong, before anything is sent), then queues the operation and returns a Work. The
// queue runs in issue order, one operation at a time, on the group's own thread, or on the
// thread that waits for a Work whose operation has not started yet: a blocking call
// (async_op=False) then runs on the caller's thread with no hand-off. A Work completes its
// future (the output tensors) before wait() returns, so callbacks chained with then() see the
// result. Errors (a dead peer, a timeout, a mismatched call) fail the Work with a RuntimeError
// naming the operation and ringlet's reason; the communicator is unusable afterwards.

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/communicator.h"

namespace ringlet::torch_backend {

// What a backend derives from: the same operations, with the same signatures, in both.
#if TORCH_VERSION_MAJOR >= 2
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

class Executor;

class RingletWork final : public c10d::Work {
 public:
  using Body = std::function<void()>;
  RingletWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
              Body body, std::weak_ptr<Executor> executor);

  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  // A recv's sender (dist.recv without src returns it), set by its body before it completes.
  int sourceRank() const override;
  void setSource(int rank) { source_.store(rank, std::memory_order_relaxed); }

  // A body that needs the Work it runs in (set before the Work is queued).
  void setBody(Body body) { body_ = std::move(body); }
  // Runs the operation and completes the Work (the executor calls it exactly once).
  void run();
  // Completes the Work with an error without running it (the group is shutting down).
  void cancel(std::exception_ptr error);

 private:
  void complete(std::exception_ptr error);

  const char* title_;
  std::vector<at::Tensor> outputs_;
  Body body_;
  // Weak: the group owns its executor, so the executor (and its thread) ends on the thread that
  // drops the group, never on its own thread through a Work it just ran.
  std::weak_ptr<Executor> executor_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_{-1};
};

// Runs queued Works in order, one at a time, on its thread or on a waiter's.
//
// A blocking call (c10d's wrapper calls wait() right after queueing) runs on its caller. Woken
// for every Work, the group's thread took 25-35% of them first (a hand-off both ways) and its
// wake-ups took the cores: 8-byte all_reduce, 2 ranks on 2 cores, 1.1-1.5 context switches and
// 1.3-1.7 futex calls per call. So where at least kLazyOf of the last 16 Works ran on their
// waiters, a Work is queued without waking the thread ("lazy"): it looks every kLazyPoll and
// takes a Work left kLazyGrace unclaimed (one nobody waits for: DDP waits on futures, which do
// not run the queue), which makes it eager again; after kLazyQuiet without Works it is eager
// too, so that an idle group costs no wake-ups. 8-byte dist.all_reduce over shm, the build
// before and after alternating: under load (a busy loop per core) 16.7-21.7 us a call against
// 10.1-11.8 (five runs each), idle 8.4-14.4 against 4.4-6.8 (three); over TCP under load the
// same within the runs' spread (20.9-28.8 against 24.0-27.4, and one slow run of 151); DDP's
// small BERT step the same (step over forward 2.38-2.52 against 2.13-2.49).
class Executor {
 public:
  Executor();
  ~Executor();
  void enqueue(c10::intrusive_ptr<RingletWork> work);
  // Runs queued Works on this thread while none is running elsewhere, until `work` has run.
  void runUntil(const RingletWork* work);
  // Runs what is queued, then stops the thread. Idempotent.
  void shutdown();

 private:
  void loop();
  // Takes the next Work if none is running (with mu_ held).
  c10::intrusive_ptr<RingletWork> takeLocked();
  void finishedLocked();

  using Clock = std::chrono::steady_clock;
  static constexpr int kLazyOf = 12;
  static constexpr auto kLazyPoll = std::chrono::milliseconds(1);
  static constexpr auto kLazyGrace = std::chrono::microseconds(200);
  static constexpr auto kLazyQuiet = std::chrono::milliseconds(100);
  struct Queued {
    c10::intrusive_ptr<RingletWork> work;
    Clock::time_point at;  // when it was queued
  };
  // Records who ran the Work just taken (with mu_ held).
  void ranOnWaiterLocked(bool waiter);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  Clock::time_point lastQueued_;
  const RingletWork* running_ = nullptr;
  uint32_t byWaiters_ = 0;  // the last 16 Works, a bit set where a waiter ran it
  bool lazy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

class ProcessGroupRinglet final : public GroupBase {
 public:
  // Collective over the ranks of the group: makes the communicator through `store`.
  ProcessGroupRinglet(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& groupName,
                      const std::string& storeDescription);
  ~ProcessGroupRinglet() override;

  const std::string getBackendName() const override { return "ringlet"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  // PyTorch 2's coalesced forms (what `_coalescing_manager` sends all_gather_into_tensor and
  // reduce_scatter_tensor calls made inside it to): the pairs one after another in one Work.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // For tools and tests: which transport each peer link uses, and the algorithm choice.
  std::string describeLinks() const;
  std::string algorithmFor(const std::string& collective, size_t bytes) const;
  // Stops the queue (after what is queued) and closes the links. Idempotent.
  void shutdown();
  // shutdown() of every group alive in this process (the exit handler's: PyTorch 2 keeps a
  // group's backend in C++ only, so Python may hold no object for it by then).
  static void shutdownAll();

 private:
  c10::intrusive_ptr<RingletWork> enqueue(c10d::OpType type, const char* title,
                                          std::vector<at::Tensor> outputs, RingletWork::Body body,
                                          const std::shared_ptr<Executor>& executor);
  // A collective on comm_ with its options' timeout (c10d's per-operation timeout).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title,
                                         std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout, RingletWork::Body body);
  int checkRoot(int64_t root, const char* op) const;
  int checkPeer(int peer, const char* op) const;

  std::unique_ptr<Communicator> comm_;
  std::shared_ptr<Executor> executor_;
  // The packed buffers of the list forms (a list of separate tensors goes through one contiguous
  // buffer), kept between calls: a fresh one per call cost its page faults every time (a 64 MiB
  // all_gather into separate tensors took 36.6 ms against 5.9 into views of one buffer). Only
  // the collectives' bodies use them, and those run one at a time (Executor).
  class PackBuffers {
   public:
    enum Which { kInput = 0, kOutput = 1 };
    // `numel` elements of `dtype`; valid until the next get() of the same buffer.
    at::Tensor get(Which which, int64_t numel, at::ScalarType dtype);
    // The tensors of a list back to back in buffer `which` (a copy).
    at::Tensor pack(Which which, const std::vector<at::Tensor>& tensors);

   private:
    std::array<at::Tensor, 2> bytes_;
  };
  std::shared_ptr<PackBuffers> packed_ = std::make_shared<PackBuffers>();
  // Point-to-point runs apart from the collectives, on two communicators of its own with a
  // thread each: messages to higher ranks (and from lower ones) on `up`, the others on `down`.
  // So the two directions between a pair never wait for each other: an isend/irecv exchange
  // (batch_isend_irecv) goes through whatever the order of the calls on the two sides.
  struct PointToPoint {
    std::unique_ptr<Communicator> comm;
    std::shared_ptr<Executor> executor;
  };
  PointToPoint up_, down_;
  PointToPoint& direction(int from, int to) { return from < to ? up_ : down_; }
  // recv from any source: messages from lower ranks come on `up`, from higher ones on `down`,
  // so its Work runs here and looks at both in turn (Communicator::tryRecv, each look a Work
  // on that direction's executor, in order with the sends and recvs queued there).
  std::shared_ptr<Executor> anySource_;
  std::shared_ptr<std::atomic<bool>> anySourceStop_ = std::make_shared<std::atomic<bool>>(false);
  std::chrono::milliseconds timeout_;
};

}  // namespace ringlet::torch_backend
