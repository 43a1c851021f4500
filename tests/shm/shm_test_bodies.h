#pragma once
// Rank bodies shared by the thread-rank and process-rank tests (one body, both modes).

#include <memory>
#include <string>

#include "ringlet/store.h"
#include "tests/shm/shm_test_support.h"

namespace ringlet::testing::shm {

// Two ranks exchange messages of 0, 1, 7 and slotBytes bytes both ways, once written into the
// slot (sendBuffer/send) and once sent from caller memory, received with recv/release and with
// recvInto.
void exchangeAwkwardSizes(int rank, int size, std::shared_ptr<Store> store,
                          const ShmOptions& options, const std::string& jobId);

// Every rank sends `messages` messages of varying sizes to every other rank and checks every
// byte of what it receives. A rank may close its links while peers still drain its messages.
void exchangeFullMesh(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                      const std::string& jobId, int messages);

}  // namespace ringlet::testing::shm
