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

// Direct writes (ShmLink::expect): rank 1 says where the next three collective messages go
// (pieces of 192 KiB of a buffer 1000 bytes short of three), rank 0 sends a point-to-point
// message first and then the three pieces (from caller memory, through sendBuffer() and from
// caller memory again). With `direct`, each piece's recv() returns its place in rank 1's buffer
// (the sender wrote it there); without, a slot. Every byte is checked, and so is the
// point-to-point message the collective receives passed over and held. Then recvInto() of
// 100 KiB messages, ten in a row.
void directWrites(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                  const std::string& jobId, bool direct);

}  // namespace ringlet::testing::shm
