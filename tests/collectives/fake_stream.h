#pragma once
// A CUDA stream and CUDA events on the CPU, for the slot algorithms' tests (slot_ring_test,
// slot_mesh_test): operations run later, in order, on a thread of their own, with random delays;
// events follow CUDA's rules (a wait refers to the most recent record at the time of the wait
// call).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace ringlet::testing {

// A queue of operations run in order by one thread: a stand-in for a CUDA stream.
class FakeStream {
 public:
  explicit FakeStream(unsigned seed) : random_(seed), worker_([this] { loop(); }) {}
  ~FakeStream() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  void enqueue(std::function<void()> op) {
    {
      std::lock_guard lock(mutex_);
      ops_.push_back(std::move(op));
    }
    changed_.notify_all();
  }

  // Like cudaStreamSynchronize.
  void synchronize() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return ops_.empty() && !running_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !ops_.empty(); });
      if (ops_.empty()) return;
      auto op = std::move(ops_.front());
      ops_.pop_front();
      running_ = true;
      const bool lag = random_() % 8 == 0;
      lock.unlock();
      // Every eighth operation starts late: queues of different ranks drift apart.
      if (lag) std::this_thread::sleep_for(std::chrono::microseconds(200));
      op();
      lock.lock();
      running_ = false;
      if (ops_.empty()) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> ops_;
  bool running_ = false;
  bool stopping_ = false;
  std::minstd_rand random_;
  std::thread worker_;
};

// CUDA event semantics: record() makes a new generation that completes when the queue reaches
// it; a wait enqueued on a queue blocks it until the generation recorded last *before the wait
// call* has completed (nothing recorded yet: no wait).
struct FakeEvent {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> completed{0};

  void record(FakeStream& stream) {
    const uint64_t generation = ++recorded;
    stream.enqueue([this, generation] { completed.store(generation); });
  }
  void waitOn(FakeStream& stream) {
    const uint64_t generation = recorded.load();
    stream.enqueue([this, generation] {
      while (completed.load() < generation) std::this_thread::yield();
    });
  }
};

}  // namespace ringlet::testing
