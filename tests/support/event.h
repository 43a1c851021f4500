#pragma once
// A one-shot event between threads (thread ranks, a test and its helper thread): one side
// set()s it when something has happened, the other waits for it instead of sleeping and hoping.
//
//   Event timedOut;
//   ... rank 1: catch the TimeoutError, then timedOut.set();
//   ... rank 0: ASSERT_TRUE(timedOut.waitFor()) << "rank 1 never timed out";
//
// waitFor() has a bound only so that a broken test fails instead of hanging: it is never the
// verdict. SetOnExit sets the event when its scope ends, also when an ASSERT returns early or an
// exception leaves, so that the waiting side is never left waiting for nothing.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace ringlet::testing {

class Event {
 public:
  void set() {
    {
      std::lock_guard lock(mutex_);
      set_ = true;
    }
    changed_.notify_all();
  }
  bool isSet() const {
    std::lock_guard lock(mutex_);
    return set_;
  }
  // True once set; false if `limit` passed first.
  bool waitFor(std::chrono::milliseconds limit = std::chrono::seconds(30)) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return set_; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool set_ = false;
};

class SetOnExit {
 public:
  explicit SetOnExit(Event& event) : event_(event) {}
  SetOnExit(const SetOnExit&) = delete;
  SetOnExit& operator=(const SetOnExit&) = delete;
  ~SetOnExit() { event_.set(); }

 private:
  Event& event_;
};

}  // namespace ringlet::testing
