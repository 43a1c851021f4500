#include "src/launcher/job_env.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <array>
#include <map>

#include "ringlet/error.h"

extern char** environ;

namespace ringlet::launcher {
namespace {

std::string randomHex(size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    throw IoError(fmt::format("OpenSSL RAND_bytes could not produce {} random bytes: {}", bytes,
                              ERR_error_string(ERR_get_error(), nullptr)));
  }
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char b : buffer) hex += fmt::format("{:02x}", b);
  return hex;
}

std::string hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

}  // namespace

JobIdentity makeJobIdentity() {
  return {fmt::format("{}-{}-{}", hostname(), getpid(), randomHex(8)), randomHex(32)};
}

std::string hostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::vector<std::string> rankEnvironment(const RankPlacement& placement, const StoreEndpoint& store,
                                         const JobIdentity& job, const Restarts& restarts) {
  // Ordered by name so every rank sees the same, predictable environment.
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    vars.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  vars["RANK"] = std::to_string(placement.globalRank());
  vars["LOCAL_RANK"] = std::to_string(placement.localRank);
  vars["WORLD_SIZE"] = std::to_string(placement.worldSize());
  vars["LOCAL_WORLD_SIZE"] = std::to_string(placement.localSize);
  vars["GROUP_RANK"] = std::to_string(placement.nodeRank);
  vars["NODE_RANK"] = std::to_string(placement.nodeRank);
  vars["MASTER_ADDR"] = store.host;
  vars["MASTER_PORT"] = std::to_string(store.masterPort);
  vars["RINGLET_STORE_ADDR"] = hostPort(store.host, store.port);
  vars["RINGLET_JOB_ID"] = job.id;
  vars["RINGLET_JOB_SECRET"] = job.secret;
  vars.erase("RINGLET_JOB_SECRET_FILE");  // its secret is the one above (or replaced by it)
  vars["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restarts.count);
  vars["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(restarts.max);
  // Like torchrun: several ranks on one host each get one OpenMP/BLAS thread unless the user
  // says otherwise, so N ranks do not start N thread pools that fight over the cores.
  if (placement.localSize > 1) {
    vars.emplace("OMP_NUM_THREADS", "1");
    vars.emplace("OPENBLAS_NUM_THREADS", "1");
  }
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

}  // namespace ringlet::launcher
