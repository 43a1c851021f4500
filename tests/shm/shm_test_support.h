#pragma once
// Helpers for the shared-memory transport tests: connect a full mesh of shm links on one rank,
// fill and check messages whose every byte depends on sender, receiver, message and position,
// and private segment directories so concurrent tests never see each other's files.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringlet/store.h"
#include "tests/support/scoped_env.h"
#include "transports/shm/shm_transport.h"
#include "transports/transport.h"

namespace ringlet::testing::shm {

using transport::Link;
using transport::WaitContext;
using transport::shm::ShmOptions;

// One rank's links to every other rank (links[rank] is null).
struct Mesh {
  int rank = 0;
  int size = 0;
  std::unique_ptr<transport::Transport> transport;
  std::vector<std::unique_ptr<Link>> links;
  std::vector<Link*> raw;  // for WaitContext::links

  Link& to(int peer) { return *links.at(peer); }
  // A wait that ends `timeout` from now.
  WaitContext wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
};

// Exchanges pids through `store` (under `prefix`), builds a TransportContext by hand and
// connects to every other rank. All ranks of a mesh pass the same jobId and prefix.
Mesh connectMesh(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                 const std::string& jobId, const std::string& prefix = "mesh",
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Same, but through the registered entry (options from the environment).
Mesh connectMeshFromEntry(int rank, int size, std::shared_ptr<Store> store,
                          const std::string& jobId, const std::string& prefix = "entry");

// Byte j of message k from src to dst.
inline std::byte messageByte(int src, int dst, int k, size_t j) {
  return static_cast<std::byte>((j * 131 + static_cast<size_t>(src) * 17 +
                                 static_cast<size_t>(dst) * 5 + static_cast<size_t>(k) * 29 + 1) &
                                0xff);
}
void fillMessage(std::byte* out, size_t bytes, int src, int dst, int k);
// Index of the first wrong byte, or -1.
long firstWrongByte(const std::byte* data, size_t bytes, int src, int dst, int k);

// A fresh directory under /dev/shm (removed by ~ShmDir).
class ShmDir {
 public:
  ShmDir();
  ~ShmDir();
  ShmDir(const ShmDir&) = delete;
  ShmDir& operator=(const ShmDir&) = delete;
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const;

 private:
  std::string path_;
};

using ringlet::testing::ScopedEnv;

// Options with a private directory and small slots (many messages wrap the FIFO quickly).
// Direct writes and lent messages on (Direct::kOn), whatever the host's kernel copy costs.
ShmOptions testOptions(const std::string& dir, size_t slotBytes = 4096, size_t slotCount = 8);

}  // namespace ringlet::testing::shm
