// Peer records are authenticated: swapping rank 0's address in the store for a relay (which
// forwards, and may change, the bytes between the ranks) now fails the job with an error naming
// the forged record, instead of a sum computed through the relay.

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/net/socket.h"
#include "src/store/authenticated_store.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A TCP relay: accepts connections and forwards each, both ways, to `target`, unchanged (one that
// got through could as well change the data). used() says whether anyone connected through it.
class Relay {
 public:
  explicit Relay(std::string target)
      : target_(std::move(target)), listener_(net::listenTcp("127.0.0.1", 0)) {
    address_ = net::SocketAddress::local(listener_.get()).toString();
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  const std::string& address() const { return address_; }
  bool used() const { return used_; }

 private:
  void run() {
    std::vector<std::pair<net::Fd, net::Fd>> pairs;
    char buffer[65536];
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (auto& [a, b] : pairs) {
        fds.push_back({a.get(), POLLIN, 0});
        fds.push_back({b.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents != 0) {
        net::Fd client = net::acceptTcp(listener_.get());
        if (client.valid()) {
          auto [host, port] = net::splitHostPort(target_, "relay target");
          pairs.emplace_back(std::move(client),
                             net::connectTcp(host, port, Clock::now() + 5s, "relay target"));
          used_ = true;
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto& pair = pairs[(i - 1) / 2];
        const bool fromClient = (i - 1) % 2 == 0;
        int from = fromClient ? pair.first.get() : pair.second.get();
        int to = fromClient ? pair.second.get() : pair.first.get();
        const ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (n <= 0) continue;
        try {
          net::writeFull(to, buffer, static_cast<size_t>(n), Clock::now() + 5s, "relay");
        } catch (const Error&) {
        }
      }
    }
  }

  std::string target_;
  net::Fd listener_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> used_{false};
  std::thread thread_;
};

// The store as a local attacker without the secret sees it: it can read and write keys. When
// rank 0 publishes its TCP address, the attacker starts a relay to it and puts the relay's
// address in its place.
class RelayingStore final : public Store {
 public:
  explicit RelayingStore(std::shared_ptr<Store> base) : base_(std::move(base)) {}
  void set(std::string_view key, std::span<const std::byte> value) override {
    const std::string k(key);
    if (k.ends_with("/tcp/addr/0")) {
      // The published value: an address, and (once records are authenticated) 32 bytes of MAC
      // after it. The attacker cannot make a MAC; it only needs to know where to relay to.
      std::string text(reinterpret_cast<const char*>(value.data()), value.size());
      if (text.size() > 32) {
        try {
          net::splitHostPort(text.substr(0, text.size() - 32), "address");
          text.resize(text.size() - 32);
        } catch (const Error&) {
        }
      }
      std::lock_guard lock(mutex_);
      relay_ = std::make_unique<Relay>(text);
      base_->setString(key, relay_->address());
      return;
    }
    base_->set(key, value);
  }
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    return base_->get(key, timeout);
  }
  int64_t add(std::string_view key, int64_t delta) override { return base_->add(key, delta); }
  bool check(std::string_view key) override { return base_->check(key); }
  std::string describe() const override { return "relaying " + base_->describe(); }

  bool relayUsed() {
    std::lock_guard lock(mutex_);
    return relay_ && relay_->used();
  }

 private:
  std::shared_ptr<Store> base_;
  std::mutex mutex_;
  std::unique_ptr<Relay> relay_;
};

TEST(PeerRecords, RelayInPlaceOfRankZerosAddressFailsTheJobByName) {
  auto store = std::make_shared<RelayingStore>(makeInProcessStore({.timeout = 10s}));
  std::vector<std::string> errors(2);
  std::vector<int> sums(2, 0);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        Bootstrap b = Bootstrap::forThread(rank, 2, store, testing::uniqueJobId("relay"));
        b.secret = "a secret the attacker does not know";
        CommunicatorOptions options;
        options.timeout = 5s;
        options.transport = "tcp";
        Communicator comm = Communicator::create(b, options);
        std::vector<int> x{rank + 1};
        comm.allreduce(std::span(x), ReduceOp::kSum);
        sums[rank] = x[0];
      } catch (const Error& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  // The job must fail: no rank may report a sum computed through the relay.
  EXPECT_FALSE(errors[1].empty()) << "rank 1 computed " << sums[1] << " through the relay";
  EXPECT_NE(errors[1].find("fails authentication"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("tcp/addr/0"), std::string::npos) << errors[1];
  EXPECT_FALSE(errors[0].empty()) << "rank 0 reported success (sum " << sums[0] << ")";
  EXPECT_FALSE(store->relayUsed()) << "rank 1 connected to the relay";
}

TEST(PeerRecords, AuthenticatedStoreRefusesForgedMovedAndForeignValues) {
  auto base = makeInProcessStore({.timeout = 1s});
  auto sealed = store::makeAuthenticatedStore("secret-one-for-the-test", base);
  sealed->setString("info/0", "host0");
  sealed->setString("info/1", "host1");
  EXPECT_EQ(sealed->getString("info/0"), "host0");
  // Forged: written without the secret.
  base->setString("info/2", "attacker");
  EXPECT_THROW(sealed->getString("info/2"), IoError);
  // Moved: a genuine value copied under another key.
  base->set("info/3", base->get("info/0"));
  EXPECT_THROW(sealed->getString("info/3"), IoError);
  // Changed: one byte of a genuine value.
  Bytes value = base->get("info/1");
  value[0] = std::byte{'H'};
  base->set("info/1", value);
  EXPECT_THROW(sealed->getString("info/1"), IoError);
  // Another job's secret.
  auto other = store::makeAuthenticatedStore("secret-two-for-the-test", base);
  EXPECT_THROW(other->getString("info/0"), IoError);
  // Counters pass through.
  EXPECT_EQ(sealed->add("n", 3), 3);
}

}  // namespace
}  // namespace ringlet
