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

// Link::lend between ranks 0 (lends) and 1: a first message, after which rank 1 reads rank 0
// (readsPeer); then five collective messages lent from buffers of their own (one of 1 KiB, below
// ShmLink::kLendMinBytes, copied into a cell), and a point-to-point one that rank 1's collective
// receives pass over and hold. Rank 1 waits before it receives, taking the messages with
// recvInto(), one with recv(), and the held one. Rank 0 flushes, then writes over its buffers:
// with `lends` flush() must have waited for the reads (rank 1 had said it was about to read, and
// reads every byte right); without, the messages went through the slots: rank 1 reads only once
// rank 0's flush() returned (a lent message would leave both waiting until the deadline).
void lentMessages(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                  const std::string& jobId, bool lends);

}  // namespace ringlet::testing::shm
