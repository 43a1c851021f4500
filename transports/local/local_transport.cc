// In-process transport for ranks that are threads of one process: each direction of a link is a
// queue of messages guarded by a mutex. It is the smallest complete implementation of the Link
// contract, used by fast unit tests and as a reference for new transports.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "transports/progress.h"
#include "transports/transport.h"

namespace ringlet::transport {
namespace {

constexpr size_t kMaxMessage = 1 << 20;

// One direction of a link.
struct Queue {
  struct Message {
    std::vector<std::byte> bytes;
    transport::Channel channel;
  };
  std::deque<Message> messages;
};

// Both directions, shared by the two ranks' Link objects.
struct Pipe {
  std::mutex mutex;
  std::condition_variable changed;
  Queue toHigh;  // from the lower rank to the higher
  Queue toLow;
  bool aborted = false;
  bool closedOnly = false;  // the "abort" was an end closing (its Link destroyed), not a failure
  int abortOrigin = -1;
  std::string abortReason;
};

// Channels waiting for their second rank, by a token published in the store.
std::mutex gPendingMutex;
std::map<std::string, std::shared_ptr<Pipe>> gPending;
std::atomic<uint64_t> gNextToken{0};

class LocalLink final : public Link {
 public:
  LocalLink(int rank, int peer, std::shared_ptr<Pipe> channel, Backoff backoff)
      : Link(peer),
        rank_(rank),
        waiter_(backoff),
        channel_(std::move(channel)),
        out_(rank < peer ? &channel_->toHigh : &channel_->toLow),
        in_(rank < peer ? &channel_->toLow : &channel_->toHigh) {}
  ~LocalLink() override { end(rank_, fmt::format("rank {} closed its link", rank_), false); }

  std::string_view transportName() const override { return "local"; }
  std::string describe() const override { return fmt::format("local {} <-> {}", rank_, peer()); }
  size_t maxMessageBytes() const override { return kMaxMessage; }

  std::byte* sendBuffer(size_t bytes, std::byte*, const WaitContext&) override {
    staging_.resize(bytes);
    return staging_.data();
  }
  void send(const std::byte* data, size_t bytes, const WaitContext& wait) override {
    std::vector<std::byte> message;
    if (data == staging_.data() && staging_.size() == bytes) {
      message.swap(staging_);
    } else {
      message.assign(data, data + bytes);
    }
    std::lock_guard lock(channel_->mutex);
    throwIfAborted(wait);
    out_->messages.push_back({std::move(message), sendChannel_});
    channel_->changed.notify_all();
  }
  void flush(const WaitContext&) override {}

  const std::byte* recv(size_t bytes, const WaitContext& wait) override {
    std::unique_lock lock(channel_->mutex);
    waitForMessage(lock, wait);
    take();
    checkLength(current_.size(), bytes, wait);
    return current_.data();
  }
  const std::byte* recvAny(size_t maxBytes, size_t* bytes, const WaitContext& wait) override {
    std::unique_lock lock(channel_->mutex);
    waitForMessage(lock, wait);
    take();
    if (current_.size() > maxBytes) checkLength(current_.size(), maxBytes, wait);
    *bytes = current_.size();
    return current_.data();
  }
  void release() override { current_.clear(); }
  void recvInto(std::byte* dst, size_t bytes, const WaitContext& wait) override {
    const std::byte* data = recv(bytes, wait);
    if (bytes > 0) kernels::copy(dst, data, bytes);
    release();
  }

  bool pump() override { return false; }
  bool messageReady() noexcept override {
    std::lock_guard lock(channel_->mutex);
    return passOver(nullptr);
  }
  bool canPeek() const override { return true; }
  const std::byte* peekMessage(size_t* bytes) noexcept override {
    std::lock_guard lock(channel_->mutex);
    if (!current_.empty() || !passOver(nullptr)) return nullptr;
    // A queued message's bytes stay where they are when it moves to current_.
    *bytes = in_->messages.front().bytes.size();
    lastChannel_ = in_->messages.front().channel;
    return in_->messages.front().bytes.data();
  }
  void checkPeer(const WaitContext& wait) override {
    std::lock_guard lock(channel_->mutex);
    if (in_->messages.empty()) throwIfAborted(wait);  // queued messages come first
  }
  void abort(int origin, std::string_view reason) override { end(origin, reason, true); }

 private:
  // Closes this end: after a failure (abort) or because it is destroyed (its peer then sees a
  // PeerError that is not aborted()). The first end to close names the reason.
  void end(int origin, std::string_view reason, bool failure) {
    std::lock_guard lock(channel_->mutex);
    if (!channel_->aborted) {
      channel_->aborted = true;
      channel_->closedOnly = !failure;
      channel_->abortOrigin = origin;
      channel_->abortReason = std::string(reason);
    }
    closed_ = true;
    channel_->changed.notify_all();
  }
  void throwIfAborted(const WaitContext& wait) const {
    if (closed_) {
      throw AbortedError(fmt::format("{}: link to rank {} was aborted", wait.describe(), peer()));
    }
    if (channel_->aborted) {
      throw PeerError(channel_->abortOrigin,
                      fmt::format("{}: rank {} aborted: {}", wait.describe(), channel_->abortOrigin,
                                  channel_->abortReason),
                      !channel_->closedOnly);
    }
  }
  // With the mutex held: holds the point-to-point messages a collective's receive passes over
  // (Link::setReceiveChannel); true when a message to show is next. `wait` null: a look, which
  // holds nothing where holding would throw.
  bool passOver(const WaitContext* wait) {
    while (!in_->messages.empty()) {
      auto& next = in_->messages.front();
      if (next.channel != transport::Channel::kPointToPoint || !passesPointToPoint()) return true;
      if (wait != nullptr) {
        holdPointToPoint(next.bytes.data(), next.bytes.size(), *wait);
      } else if (!tryHoldPointToPoint(next.bytes.data(), next.bytes.size())) {
        return false;
      }
      in_->messages.pop_front();
    }
    return false;
  }
  // With the mutex held: the next message (passOver() found it) becomes current_.
  void take() {
    current_ = std::move(in_->messages.front().bytes);
    lastChannel_ = in_->messages.front().channel;
    in_->messages.pop_front();
  }
  // The wait engine (progress.h), blocking on the channel's condition variable. Messages already
  // queued are delivered before an abort is reported.
  void waitForMessage(std::unique_lock<std::mutex>& lock, const WaitContext& wait) {
    if (passOver(&wait)) return;
    lock.unlock();
    waitFor(
        *this, wait, waiter_, /*slowWake=*/false,
        [&] {
          std::lock_guard guard(channel_->mutex);
          return passOver(&wait);
        },
        [&] {
          std::lock_guard guard(channel_->mutex);
          if (in_->messages.empty()) throwIfAborted(wait);
        },
        [&](std::chrono::nanoseconds slice, bool) {
          std::unique_lock guard(channel_->mutex);
          if (in_->messages.empty() && !channel_->aborted) channel_->changed.wait_for(guard, slice);
        },
        [] { return std::string("a message"); });
    lock.lock();
  }
  void checkLength(size_t got, size_t expected, const WaitContext& wait) const {
    if (got != expected) {
      throw IoError(fmt::format(
          "{}: rank {} sent a message of {} bytes where {} were expected (the ranks disagree "
          "about the operation)",
          wait.describe(), peer(), got, expected));
    }
  }

  int rank_;
  Waiter waiter_;
  std::shared_ptr<Pipe> channel_;
  Queue* out_;
  Queue* in_;
  std::vector<std::byte> staging_;
  std::vector<std::byte> current_;
  bool closed_ = false;
};

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(TransportContext context) : context_(std::move(context)) {}
  std::string_view name() const override { return "local"; }

  std::vector<std::unique_ptr<Link>> connect(std::span<const int> peers,
                                             Deadline deadline) override {
    std::vector<std::unique_ptr<Link>> links;
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    for (int peer : peers) {
      const int low = std::min(peer, context_.rank);
      const int high = std::max(peer, context_.rank);
      const std::string key = fmt::format("local/{}-{}/{}", low, high, round_[peer]++);
      std::shared_ptr<Pipe> channel;
      if (context_.rank == low) {
        channel = std::make_shared<Pipe>();
        const std::string token = fmt::format("{}:{}", getpid(), gNextToken++);
        {
          std::lock_guard lock(gPendingMutex);
          gPending[token] = channel;
        }
        context_.store->setString(key, token);
      } else {
        const std::string token =
            context_.store->getString(key, std::max(timeout, std::chrono::milliseconds(1)));
        std::lock_guard lock(gPendingMutex);
        auto it = gPending.find(token);
        if (it == gPending.end()) {
          throw InvalidArgument(fmt::format(
              "local transport: rank {} is not a thread of this process (token {}); use tcp or "
              "shm between processes",
              peer, token));
        }
        channel = it->second;
        gPending.erase(it);
      }
      links.push_back(std::make_unique<LocalLink>(
          context_.rank, peer, std::move(channel),
          Backoff::forHost(context_.ranksOnHost, context_.adaptiveWait)));
    }
    return links;
  }

 private:
  TransportContext context_;
  std::map<int, int> round_;
};

}  // namespace

}  // namespace ringlet::transport

namespace ringlet::transport::local {

TransportEntry transportEntry() {
  return TransportEntry{
      .name = "local",
      .priority = 0,  // lowest: "auto" picks it only when nothing else can link the pair
      .sharesMemory = false,
      .options = {},
      .probe = [](const Settings&) { return std::string(); },
      .checkSettings = {},  // it has none
      .canConnect = [](const PeerInfo& self,
                       const PeerInfo& peer) { return self.sameProcess(peer); },
      .make = [](TransportContext context) -> std::unique_ptr<Transport> {
        return std::make_unique<LocalTransport>(std::move(context));
      },
      .describe =
          [](const Settings&) {
            return std::string("in-process queues between thread ranks of one process");
          },
  };
}

}  // namespace ringlet::transport::local
