// File store shared by forked processes (the store runProcessRanks gives its ranks).

#include <gtest/gtest.h>

#include <string>

#include "ringlet/store.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;

TEST(FileStoreProcesses, ExchangeAndAtomicAdd) {
  constexpr int kRanks = 4;
  constexpr int kAdds = 200;
  testing::runProcessRanks(
      kRanks,
      [](int rank, int size, std::shared_ptr<Store> store) {
        store->setString("rank" + std::to_string(rank), std::to_string(rank * 10 + 1));
        for (int peer = 0; peer < size; ++peer) {
          EXPECT_EQ(store->getString("rank" + std::to_string(peer), 5000ms),
                    std::to_string(peer * 10 + 1));
        }
        for (int i = 0; i < kAdds; ++i) store->add("counter", 1);
        // Barrier on the counter, then everyone sees the full count.
        const int64_t last = store->add("done", 1);
        if (last == size) store->setString("all-done", "1");
        store->get("all-done", 5000ms);
        EXPECT_EQ(store->getString("counter"), std::to_string(size * kAdds));
      },
      std::chrono::seconds(30));
}

}  // namespace
}  // namespace ringlet
