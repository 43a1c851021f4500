#pragma once
// Test helper: clears every variable Bootstrap::fromEnvironment reads and restores the saved
// values (and the parsed config) when it goes out of scope.

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "src/config.h"
#include "src/net/socket.h"

namespace ringlet::testing {

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      if (v != nullptr) saved_[name] = v;
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const char* name : kNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
    config::reloadEnvironment();
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) { ::unsetenv(name.c_str()); }

 private:
  static constexpr const char* kNames[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "TORCHELASTIC_RUN_ID",
                                           "TORCHELASTIC_USE_AGENT_STORE",
                                           "TORCHELASTIC_RESTART_COUNT",
                                           "OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "OMPI_MCA_ess_base_jobid",
                                           "SLURM_PROCID",
                                           "SLURM_NTASKS",
                                           "SLURM_LOCALID",
                                           "SLURM_TASKS_PER_NODE",
                                           "SLURM_NODEID",
                                           "SLURM_JOB_ID",
                                           "SLURM_STEP_ID",
                                           "SLURM_STEP_NODELIST",
                                           "SLURM_NODELIST",
                                           "SLURM_JOB_NODELIST",
                                           "RINGLET_STORE_ADDR",
                                           "RINGLET_JOB_ID",
                                           "RINGLET_JOB_SECRET",
                                           "RINGLET_JOB_SECRET_FILE",
                                           "RINGLET_TIMEOUT",
                                           "RINGLET_STORE"};
  std::map<std::string, std::string> saved_;
};

// A port that was free a moment ago, outside the ephemeral range (see net::unusedPort).
inline uint16_t freePort() { return net::unusedPort("127.0.0.1"); }

}  // namespace ringlet::testing
