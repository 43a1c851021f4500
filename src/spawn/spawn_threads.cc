// spawnThreads(): ranks as threads of this process over an in-process store (and so the
// in-process transport between them).
#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/spawn.h"
#include "ringlet/store.h"
#include "src/spawn/spawn_common.h"

namespace ringlet {
namespace {

using spawn_detail::Failure;

// The ranks' shared state: who is still running, each live communicator (so that a failure or
// the deadline can abort the others), and the first failure.
class ThreadJob {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ThreadJob(int n) : comms_(n, nullptr), running_(n) {}

  // Registers `comm` for aborts while it lives; aborts it at once if the job already failed.
  void attach(int rank, Communicator* comm) {
    std::lock_guard lock(mu_);
    comms_[rank] = comm;
    if (aborting_) comm->abort(abortReason_);
  }
  void detach(int rank) {
    std::lock_guard lock(mu_);
    comms_[rank] = nullptr;
  }
  void finished(std::optional<Failure> failure) {
    std::lock_guard lock(mu_);
    --running_;
    if (failure) failures_.push_back(std::move(*failure));
    changed_.notify_all();
  }
  // Waits until every rank ended, or one failed (then `grace` more), or `deadline` passed;
  // aborts the communicators of the ranks still running after that.
  void supervise(std::chrono::milliseconds grace, std::optional<Clock::time_point> deadline) {
    std::unique_lock lock(mu_);
    auto done = [&] { return running_ == 0 || !failures_.empty(); };
    if (deadline) {
      timedOut_ = !changed_.wait_until(lock, *deadline, done);
    } else {
      changed_.wait(lock, done);
    }
    if (running_ == 0) return;
    changed_.wait_for(lock, grace, [&] { return running_ == 0; });
    if (running_ == 0) return;
    aborting_ = true;
    abortReason_ = failures_.empty()
                       ? std::string("spawnThreads: the job passed its deadline")
                       : fmt::format("spawnThreads: rank {} failed", failures_.front().rank);
    for (Communicator* comm : comms_) {
      if (comm != nullptr) comm->abort(abortReason_);
    }
  }
  bool timedOut() {
    std::lock_guard lock(mu_);
    return timedOut_;
  }
  std::optional<Failure> first() {
    std::lock_guard lock(mu_);
    return spawn_detail::rootFailure(failures_);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Communicator*> comms_;
  int running_;
  bool aborting_ = false;
  std::string abortReason_;
  bool timedOut_ = false;
  std::vector<Failure> failures_;  // in the order seen
};

void runRank(ThreadJob& job, int rank, int n, const std::shared_ptr<Store>& store,
             const std::string& jobId, const RankFunction& fn, const CommunicatorOptions& options) {
  std::optional<Failure> failure;
  try {
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, n, store, jobId), options);
    job.attach(rank, &comm);
    struct Detach {
      ThreadJob& job;
      int rank;
      ~Detach() { job.detach(rank); }
    } detach{job, rank};
    fn(comm);
  } catch (const PeerError& e) {
    failure = Failure{.rank = rank, .how = "exception", .message = e.what(), .blames = e.peer()};
  } catch (const std::exception& e) {
    failure = Failure{.rank = rank, .how = "exception", .message = e.what()};
  } catch (...) {
    failure = Failure{.rank = rank, .how = "exception", .message = "an exception of unknown type"};
  }
  job.finished(std::move(failure));
}

}  // namespace

void spawnThreads(int n, const RankFunction& fn, SpawnOptions options) {
  spawn_detail::checkArguments(n, fn, "spawnThreads");
  const std::string jobId = spawn_detail::newJobId("threads");
  // Thread ranks share this process's memory: the in-process transport, unless one is forced.
  if (options.communicator.transport == "auto") options.communicator.transport = "local";
  auto store = makeInProcessStore();
  ThreadJob job(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back(runRank, std::ref(job), rank, n, store, std::cref(jobId), std::cref(fn),
                         std::cref(options.communicator));
  }
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (options.timeout.count() > 0) deadline = std::chrono::steady_clock::now() + options.timeout;
  job.supervise(options.grace, deadline);
  for (std::thread& t : threads) t.join();
  if (auto failure = job.first()) spawn_detail::throwFailure(*failure, n, "spawnThreads");
  if (job.timedOut()) {
    throw TimeoutError(fmt::format("spawnThreads: the job of {} ranks passed its deadline of {} ms",
                                   n, options.timeout.count()));
  }
}

}  // namespace ringlet
