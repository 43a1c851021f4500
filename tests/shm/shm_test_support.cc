#include "tests/shm/shm_test_support.h"

#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "ringlet/communicator.h"
#include "src/config.h"
#include "transports/registry.h"

namespace ringlet::testing::shm {
namespace {

transport::TransportContext makeContext(int rank, int size, const std::shared_ptr<Store>& store,
                                        const std::string& jobId, const std::string& prefix) {
  store->setString(fmt::format("{}/pid/{}", prefix, rank), std::to_string(getpid()));
  transport::TransportContext context;
  context.rank = rank;
  context.size = size;
  context.store = makePrefixStore(prefix + "/transport", store);
  context.jobId = jobId;
  context.secret = "test-secret";
  for (int r = 0; r < size; ++r) {
    transport::PeerInfo info;
    info.rank = r;
    info.hostname = "test-host";
    info.hostId = "test-host-id";
    info.pid = std::stoi(store->getString(fmt::format("{}/pid/{}", prefix, r)));
    context.peers.push_back(info);
  }
  return context;
}

Mesh finish(Mesh mesh, std::chrono::milliseconds timeout) {
  std::vector<int> peers;
  for (int r = 0; r < mesh.size; ++r) {
    if (r != mesh.rank) peers.push_back(r);
  }
  auto links = mesh.transport->connect(peers, transport::Clock::now() + timeout);
  mesh.links.resize(mesh.size);
  for (size_t i = 0; i < peers.size(); ++i) mesh.links[peers[i]] = std::move(links.at(i));
  for (auto& link : mesh.links) mesh.raw.push_back(link.get());
  return mesh;
}

}  // namespace

WaitContext Mesh::wait(std::chrono::milliseconds timeout) const {
  WaitContext wait;
  wait.deadline = transport::Clock::now() + timeout;
  wait.op = "shm-test";
  wait.rank = rank;
  wait.links = raw;
  return wait;
}

Mesh connectMesh(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                 const std::string& jobId, const std::string& prefix,
                 std::chrono::milliseconds timeout) {
  Mesh mesh;
  mesh.rank = rank;
  mesh.size = size;
  mesh.transport =
      transport::shm::makeShmTransport(makeContext(rank, size, store, jobId, prefix), options);
  return finish(std::move(mesh), timeout);
}

Mesh connectMeshFromEntry(int rank, int size, std::shared_ptr<Store> store,
                          const std::string& jobId, const std::string& prefix) {
  const transport::TransportEntry* entry = transport::findTransport("shm");
  if (entry == nullptr) throw std::runtime_error("the shm transport is not registered");
  Mesh mesh;
  mesh.rank = rank;
  mesh.size = size;
  transport::TransportContext context = makeContext(rank, size, store, jobId, prefix);
  context.settings = transport::readSettings(*entry);  // RINGLET_SHM_* as the tests set them
  mesh.transport = entry->make(std::move(context));
  return finish(std::move(mesh), std::chrono::seconds(10));
}

void fillMessage(std::byte* out, size_t bytes, int src, int dst, int k) {
  for (size_t j = 0; j < bytes; ++j) out[j] = messageByte(src, dst, k, j);
}

long firstWrongByte(const std::byte* data, size_t bytes, int src, int dst, int k) {
  for (size_t j = 0; j < bytes; ++j) {
    if (data[j] != messageByte(src, dst, k, j)) return static_cast<long>(j);
  }
  return -1;
}

ShmDir::ShmDir() {
  std::string pattern = "/dev/shm/ringlet-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp in /dev/shm failed");
  path_ = pattern;
}

ShmDir::~ShmDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> ShmDir::files() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

ShmOptions testOptions(const std::string& dir, size_t slotBytes, size_t slotCount) {
  ShmOptions options;
  options.dir = dir;
  options.slotBytes = slotBytes;
  options.slotCount = slotCount;
  options.direct = ShmOptions::Direct::kOn;  // the tests of direct writes and lending expect them
  return options;
}

}  // namespace ringlet::testing::shm
