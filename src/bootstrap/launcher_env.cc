#include "src/bootstrap/launcher_env.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "ringlet/error.h"
#include "src/bootstrap/slurm_hostlist.h"
#include "src/config.h"

namespace ringlet::bootstrap {
namespace {

// The variables one launcher sets. Empty names: that launcher has no such variable.
struct LauncherVariables {
  const char* source;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
  const char* jobId;
  const char* jobStep;
};

// Every standard variable ringlet reads, in one place. Detection goes down this list; the first
// launcher whose rank variable is set wins (ringlet-run is chosen by RINGLET_STORE_ADDR instead).
constexpr LauncherVariables kRingletRun = {
    "ringlet-run", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "", ""};
constexpr LauncherVariables kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", ""},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", ""},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "", "SLURM_JOB_ID", "SLURM_STEP_ID"},
};
constexpr const char* kMasterAddr = "MASTER_ADDR";
constexpr const char* kMasterPort = "MASTER_PORT";
// torchrun's agent store (see LauncherEnvironment::agentStore).
constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
// Slurm gives tasks per node as "2(x3),1"; the entry for this node (SLURM_NODEID) is its
// local size.
constexpr const char* kSlurmTasksPerNode = "SLURM_TASKS_PER_NODE";
constexpr const char* kSlurmNodeId = "SLURM_NODEID";
// The hosts of a Slurm step, the step's own list first; task 0 runs on the first host.
constexpr const char* kSlurmNodeLists[] = {"SLURM_STEP_NODELIST", "SLURM_NODELIST",
                                           "SLURM_JOB_NODELIST"};

std::optional<std::string> get(const char* name) {
  if (name == nullptr || *name == '\0') return std::nullopt;
  return config::getenv(name);
}

int64_t parseInteger(const std::string& text, const char* name) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw InvalidArgument(fmt::format("{}='{}' is not an integer", name, text));
  }
  return value;
}

int readInt(const char* name, int64_t min, int64_t max, std::optional<int> fallback) {
  auto text = get(name);
  if (!text) {
    if (fallback) return *fallback;
    throw InvalidArgument(fmt::format("{} is not set", name));
  }
  const int64_t value = parseInteger(*text, name);
  if (value < min || value > max) {
    throw InvalidArgument(
        fmt::format("{}='{}' is out of range (expected {}..{})", name, *text, min, max));
  }
  return static_cast<int>(value);
}

// "2(x3),1" with node 3 -> 1.
std::optional<int> slurmLocalSize() {
  auto text = get(kSlurmTasksPerNode);
  if (!text) return std::nullopt;
  const int node = readInt(kSlurmNodeId, 0, 1 << 20, 0);
  int index = 0;
  size_t pos = 0;
  auto fail = [&]() -> std::optional<int> {
    throw InvalidArgument(
        fmt::format("{}='{}' is not a Slurm task list like '2(x3),1'", kSlurmTasksPerNode, *text));
  };
  while (pos < text->size()) {
    size_t end = text->find(',', pos);
    if (end == std::string::npos) end = text->size();
    const std::string item = text->substr(pos, end - pos);
    const size_t paren = item.find("(x");
    const std::string count = item.substr(0, paren);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') return fail();
      repeat = parseInteger(item.substr(paren + 2, item.size() - paren - 3), kSlurmTasksPerNode);
    }
    const int64_t tasks = parseInteger(count, kSlurmTasksPerNode);
    if (tasks < 1 || repeat < 1) return fail();
    if (node < index + repeat) return static_cast<int>(tasks);
    index += static_cast<int>(repeat);
    pos = end + 1;
  }
  return fail();
}

void readMaster(LauncherEnvironment& env) {
  auto addr = get(kMasterAddr);
  auto port = get(kMasterPort);
  if (addr) env.masterAddr = *addr;
  if (port) env.masterPort = static_cast<uint16_t>(readInt(kMasterPort, 1, 65535, std::nullopt));
  if (env.source == "torchrun" && env.size > 1 && (!addr || !port)) {
    throw InvalidArgument(
        fmt::format("{} and {} must be set when RANK and WORLD_SIZE are ({} "
                    "is not set)",
                    kMasterAddr, kMasterPort, addr ? kMasterPort : kMasterAddr));
  }
  if (env.source != "openmpi" && env.source != "slurm") return;
  // Open MPI / Slurm on one host: rank 0 listens on loopback, on a port every rank derives
  // from the job id. Across hosts, Slurm's node list names rank 0's host (its first); under
  // Open MPI rank 0's address cannot be guessed.
  if (!addr && env.source == "slurm" && env.localSize < env.size) {
    for (const char* name : kSlurmNodeLists) {
      if (auto list = get(name)) {
        addr = expandSlurmHostlist(*list, name).front();
        env.masterAddr = *addr;
        break;
      }
    }
  }
  if (!addr) {
    if (env.localSize < env.size) {
      throw InvalidArgument(fmt::format(
          "{} is not set and the {} job spans several hosts ({} ranks, {} on this host): set "
          "{} to an address of rank 0's host that every host reaches (and {} where the port "
          "derived from the job id is taken)",
          kMasterAddr, env.source, env.size, env.localSize, kMasterAddr, kMasterPort));
    }
    env.masterAddr = "127.0.0.1";
  }
  if (!port) {
    if (env.launcherJobId.empty()) {
      throw InvalidArgument(
          fmt::format("{} is not set and the {} job id is unknown to derive "
                      "one from",
                      kMasterPort, env.source));
    }
    env.masterPort = derivePort(env.launcherJobId);
  }
}

// torchrun sets TORCHELASTIC_USE_AGENT_STORE to Python's str(bool): "True" or "False".
void readAgentStore(LauncherEnvironment& env) {
  if (auto flag = get(kUseAgentStore)) {
    if (*flag != "True" && *flag != "False") {
      throw InvalidArgument(
          fmt::format("{}='{}' is neither True nor False", kUseAgentStore, *flag));
    }
    env.agentStore = *flag == "True";
  }
  env.restartCount = readInt(kRestartCount, 0, 1 << 30, 0);
}

}  // namespace

uint16_t derivePort(const std::string& launcherJobId) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : launcherJobId) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<uint16_t>(kDerivedPortBase + hash % kDerivedPorts);
}

LauncherEnvironment readLauncherEnvironment(bool launcherStore) {
  LauncherEnvironment env;
  const LauncherVariables* vars = nullptr;
  if (launcherStore) {
    vars = &kRingletRun;
  } else {
    for (const auto& launcher : kLaunchers) {
      // torchrun is recognised by either of RANK / WORLD_SIZE, so that one without the other is
      // reported instead of silently giving a world of one.
      if (get(launcher.rank) || (launcher.size == kLaunchers[0].size && get(launcher.size))) {
        vars = &launcher;
        break;
      }
    }
  }
  if (vars == nullptr) return env;  // manual: a world of one
  env.source = vars->source;
  constexpr int64_t kMaxRanks = 1 << 24;
  env.size = readInt(vars->size, 1, kMaxRanks, std::nullopt);
  env.rank = readInt(vars->rank, 0, env.size - 1, std::nullopt);
  // Without local variables, assume every rank runs on this host.
  int localSizeFallback = env.size;
  if (env.source == "slurm") localSizeFallback = slurmLocalSize().value_or(env.size);
  env.localSize = readInt(vars->localSize, 1, env.size, localSizeFallback);
  env.localRank = readInt(vars->localRank, 0, env.localSize - 1,
                          env.localSize == env.size ? std::optional(env.rank) : std::nullopt);
  if (auto id = get(vars->jobId)) {
    // torchrun's default rendezvous id "none" tells jobs apart no better than nothing.
    if (*id != "none") env.launcherJobId = *id;
    if (auto step = get(vars->jobStep)) env.launcherJobId += "." + *step;
  }
  if (!launcherStore) readMaster(env);
  if (env.source == "torchrun") readAgentStore(env);
  return env;
}

}  // namespace ringlet::bootstrap
