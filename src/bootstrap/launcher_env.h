#pragma once
// What the process launcher (ringlet-run, torchrun, Open MPI, Slurm) put in the environment.
// The standard launcher variables (RANK, MASTER_ADDR, OMPI_COMM_WORLD_*, SLURM_*, ...) are read
// in launcher_env.cc and nowhere else; RINGLET_* variables come from src/config.h.

#include <cstdint>
#include <optional>
#include <string>

namespace ringlet::bootstrap {

struct LauncherEnvironment {
  // "ringlet-run", "torchrun", "openmpi", "slurm", or "manual" when no launcher is found.
  std::string source = "manual";
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  // Where rank 0 hosts the store (unset under ringlet-run, whose launcher hosts it).
  std::string masterAddr;
  uint16_t masterPort = 0;
  // The launcher's own job id (TORCHELASTIC_RUN_ID, the Open MPI job id, SLURM_JOB_ID.STEP);
  // empty if it gave none.
  std::string launcherJobId;
  // torchrun's agent hosts a c10d TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True),
  // and how many times it restarted the workers (TORCHELASTIC_RESTART_COUNT; keys of earlier
  // attempts stay in that store).
  bool agentStore = false;
  int restartCount = 0;
};

// Reads the launcher variables. `launcherStore` is true when RINGLET_STORE_ADDR is set (then
// RANK and WORLD_SIZE are required and MASTER_* are not used). Throws InvalidArgument naming the
// variable and its value when one is malformed or inconsistent (rank >= size, port out of range).
LauncherEnvironment readLauncherEnvironment(bool launcherStore);

// The port rank 0 listens on when Open MPI or Slurm runs a job on one host without MASTER_PORT:
// a hash of the launcher's job id mapped into [kDerivedPortBase, kDerivedPortBase + kDerivedPorts),
// below Linux's ephemeral range, so every process of the job computes the same one.
inline constexpr uint16_t kDerivedPortBase = 10000;
inline constexpr uint16_t kDerivedPorts = 22000;
uint16_t derivePort(const std::string& launcherJobId);

}  // namespace ringlet::bootstrap
