// Bootstrap::fromEnvironment parsing and Bootstrap::forThread.

#include "ringlet/bootstrap.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/error.h"
#include "src/bootstrap/launcher_env.h"
#include "src/bootstrap/slurm_hostlist.h"
#include "src/config.h"
#include "tests/store/env_guard.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using testing::EnvGuard;

// Expects fromEnvironment() to throw InvalidArgument whose message contains every `needles`.
void expectInvalid(std::initializer_list<std::string> needles) {
  try {
    config::reloadEnvironment();
    Bootstrap::fromEnvironment();
    ADD_FAILURE() << "fromEnvironment() accepted a malformed environment";
  } catch (const InvalidArgument& e) {
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' does not contain '" << n << "'";
    }
  }
}

TEST(BootstrapForThread, FillsRankSizeAndStore) {
  auto store = makeInProcessStore();
  Bootstrap b = Bootstrap::forThread(2, 4, store, "job-x");
  EXPECT_EQ(b.rank, 2);
  EXPECT_EQ(b.size, 4);
  EXPECT_EQ(b.localRank, 2);
  EXPECT_EQ(b.localSize, 4);
  EXPECT_EQ(b.store, store);
  EXPECT_EQ(b.jobId, "job-x");
  EXPECT_THROW(Bootstrap::forThread(4, 4, store), InvalidArgument);
  EXPECT_THROW(Bootstrap::forThread(-1, 4, store), InvalidArgument);
  EXPECT_THROW(Bootstrap::forThread(0, 0, store), InvalidArgument);
  EXPECT_THROW(Bootstrap::forThread(0, 1, nullptr), InvalidArgument);
}

TEST(BootstrapEnvironment, NothingSetIsAWorldOfOne) {
  EnvGuard env;
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.size, 1);
  EXPECT_EQ(b.source, "manual");
  ASSERT_TRUE(b.store);
  b.store->setString("k", "v");
  EXPECT_EQ(b.store->getString("k", 100ms), "v");
}

TEST(BootstrapEnvironment, TorchrunRankZeroHostsTheStore) {
  EnvGuard env;
  const uint16_t port = testing::freePort();
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  env.set("LOCAL_RANK", "0");
  env.set("LOCAL_WORLD_SIZE", "1");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", std::to_string(port));
  env.set("RINGLET_TIMEOUT", "0.3");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_EQ(b.source, "torchrun");
  EXPECT_EQ(b.jobId, "127.0.0.1:" + std::to_string(port));
  EXPECT_TRUE(b.keepAlive);
  EXPECT_NE(b.store->describe().find(std::to_string(port)), std::string::npos);
  b.store->setString("k", "v");
  EXPECT_EQ(b.store->getString("k"), "v");
  // The default get() timeout comes from RINGLET_TIMEOUT (0.3 s), not the 300 s default.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(b.store->get("missing"), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(BootstrapEnvironment, TorchrunRunIdAndJobIdPrecedence) {
  EnvGuard env;
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_RANK", "1");
  env.set("LOCAL_WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  env.set("TORCHELASTIC_RUN_ID", "run42");
  env.set("RINGLET_STORE_ADDR", "127.0.0.1:1");  // launcher store: MASTER_* unused
  env.set("RINGLET_TIMEOUT", "0.2");
  // connectTcpStore fails against port 1, so check parsing through the launcher layer and the
  // job id through a reachable store below.
  config::reloadEnvironment();
  auto launcher = bootstrap::readLauncherEnvironment(true);
  EXPECT_EQ(launcher.source, "ringlet-run");
  EXPECT_EQ(launcher.rank, 3);
  EXPECT_EQ(launcher.size, 8);
  EXPECT_EQ(launcher.localRank, 1);
  EXPECT_EQ(launcher.localSize, 2);
  EXPECT_THROW(Bootstrap::fromEnvironment(), TimeoutError);

  env.unset("RINGLET_STORE_ADDR");
  launcher = bootstrap::readLauncherEnvironment(false);
  EXPECT_EQ(launcher.source, "torchrun");
  EXPECT_EQ(launcher.launcherJobId, "run42");
  EXPECT_EQ(launcher.masterPort, 29500);
}

TEST(BootstrapEnvironment, RingletRunUsesLauncherStoreJobIdAndSecret) {
  EnvGuard env;
  std::string raw("\x00\xff\x10\xab", 4);
  for (char c = 0; c < 12; ++c) raw += c;
  auto server = TcpStoreServer::start({.secret = raw});
  env.set("RINGLET_STORE_ADDR", "127.0.0.1:" + std::to_string(server->port()));
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("RINGLET_JOB_ID", "job-7");
  env.set("RINGLET_JOB_SECRET", "00ff10Ab000102030405060708090a0b");
  env.set("TORCHELASTIC_RUN_ID", "ignored");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_EQ(b.source, "ringlet-run");
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.size, 2);
  EXPECT_EQ(b.localRank, 1);  // no LOCAL_*: one host
  EXPECT_EQ(b.localSize, 2);
  EXPECT_EQ(b.jobId, "job-7");
  EXPECT_EQ(b.secret, raw);
  // The client proved that secret to the launcher's store.
  b.store->setString("k", "v");
  EXPECT_EQ(b.store->getString("k"), "v");
  EXPECT_FALSE(b.keepAlive);
  b.store->setString("from-rank-1", "x");
  auto direct = connectTcpStore("127.0.0.1", server->port(), {.secret = raw});
  EXPECT_EQ(direct->getString("from-rank-1", 1000ms), "x");
}

TEST(BootstrapEnvironment, OpenMpiDerivesAddressPortAndJobId) {
  EnvGuard env;
  env.set("OMPI_COMM_WORLD_RANK", "2");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  env.set("OMPI_MCA_ess_base_jobid", "2046230529");
  config::reloadEnvironment();
  auto launcher = bootstrap::readLauncherEnvironment(false);
  EXPECT_EQ(launcher.source, "openmpi");
  EXPECT_EQ(launcher.rank, 2);
  EXPECT_EQ(launcher.size, 4);
  EXPECT_EQ(launcher.masterAddr, "127.0.0.1");
  EXPECT_EQ(launcher.masterPort, bootstrap::derivePort("2046230529"));
  EXPECT_GE(launcher.masterPort, bootstrap::kDerivedPortBase);
  EXPECT_LT(launcher.masterPort, bootstrap::kDerivedPortBase + bootstrap::kDerivedPorts);
  EXPECT_NE(bootstrap::derivePort("2046230529"), bootstrap::derivePort("2046230530"));

  // Across hosts the address cannot be guessed.
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  expectInvalid({"MASTER_ADDR"});
  env.set("MASTER_ADDR", "10.0.0.1");
  config::reloadEnvironment();
  launcher = bootstrap::readLauncherEnvironment(false);
  EXPECT_EQ(launcher.masterAddr, "10.0.0.1");
}

// A master that resolves to loopback on rank 0's host while ranks run elsewhere (Debian maps a
// host's own name to 127.0.1.1): rank 0 says so instead of hosting a store nobody can reach.
TEST(BootstrapEnvironment, LoopbackMasterWithRanksOnOtherHostsIsNamed) {
  EnvGuard env;
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  env.set("MASTER_PORT", std::to_string(testing::freePort()));
  env.set("RINGLET_JOB_SECRET", std::string(32, 'c'));
  env.set("RINGLET_TIMEOUT", "0.3");
  for (const char* master : {"localhost", "127.0.1.1"}) {
    env.set("MASTER_ADDR", master);
    config::reloadEnvironment();
    try {
      Bootstrap::fromEnvironment();
      ADD_FAILURE() << "MASTER_ADDR=" << master << " was accepted";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("MASTER_ADDR={} resolves to 127.", master)),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("2 of the 4 ranks (openmpi) run on other hosts"), std::string::npos)
          << what;
    }
  }
  // Every rank on one host: loopback is right, and rank 0 hosts the store.
  env.set("OMPI_COMM_WORLD_SIZE", "1");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
  config::reloadEnvironment();
  EXPECT_TRUE(Bootstrap::fromEnvironment().keepAlive);
}

TEST(BootstrapEnvironment, SlurmTaskListGivesLocalSize) {
  EnvGuard env;
  env.set("SLURM_PROCID", "5");
  env.set("SLURM_NTASKS", "7");
  env.set("SLURM_LOCALID", "0");
  env.set("SLURM_TASKS_PER_NODE", "2(x3),1");
  env.set("SLURM_NODEID", "3");
  env.set("SLURM_JOB_ID", "1234");
  env.set("SLURM_STEP_ID", "0");
  env.set("MASTER_ADDR", "node0");
  env.set("MASTER_PORT", "29400");
  config::reloadEnvironment();
  auto launcher = bootstrap::readLauncherEnvironment(false);
  EXPECT_EQ(launcher.source, "slurm");
  EXPECT_EQ(launcher.rank, 5);
  EXPECT_EQ(launcher.size, 7);
  EXPECT_EQ(launcher.localSize, 1);
  EXPECT_EQ(launcher.launcherJobId, "1234.0");
  env.set("SLURM_TASKS_PER_NODE", "2(x3");
  expectInvalid({"SLURM_TASKS_PER_NODE", "2(x3"});
}

TEST(SlurmHostlist, ExpandsRangesListsAndPadding) {
  using V = std::vector<std::string>;
  const std::string what = "SLURM_NODELIST";
  EXPECT_EQ(bootstrap::expandSlurmHostlist("node[01-04],gpu7", what),
            (V{"node01", "node02", "node03", "node04", "gpu7"}));
  EXPECT_EQ(bootstrap::expandSlurmHostlist("a[8-10,3]b", what), (V{"a8b", "a9b", "a10b", "a3b"}));
  EXPECT_EQ(bootstrap::expandSlurmHostlist("r[1-2]n[1-2]", what),
            (V{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(bootstrap::expandSlurmHostlist("single", what), (V{"single"}));
  for (const char* bad : {"", "node[1-", "node[3-1]", "a,,b", "x]", "n[a-b]", "n[1-99999999]"}) {
    EXPECT_THROW(bootstrap::expandSlurmHostlist(bad, what), InvalidArgument) << bad;
  }
}

// Across hosts without MASTER_ADDR, the first host of the step's node list hosts the store.
TEST(BootstrapEnvironment, SlurmNodeListNamesTheMaster) {
  EnvGuard env;
  env.set("SLURM_PROCID", "3");
  env.set("SLURM_NTASKS", "4");
  env.set("SLURM_LOCALID", "1");
  env.set("SLURM_TASKS_PER_NODE", "2(x2)");
  env.set("SLURM_NODEID", "1");
  env.set("SLURM_JOB_ID", "77");
  env.set("SLURM_STEP_ID", "2");
  env.set("SLURM_NODELIST", "node[07-08],gpu1");
  config::reloadEnvironment();
  auto launcher = bootstrap::readLauncherEnvironment(false);
  EXPECT_EQ(launcher.masterAddr, "node07");
  EXPECT_EQ(launcher.masterPort, bootstrap::derivePort("77.2"));
  env.set("SLURM_STEP_NODELIST", "gpu[3-4]");  // the step's own list wins
  config::reloadEnvironment();
  EXPECT_EQ(bootstrap::readLauncherEnvironment(false).masterAddr, "gpu3");
  env.set("MASTER_ADDR", "10.1.2.3");  // and MASTER_ADDR over both
  config::reloadEnvironment();
  EXPECT_EQ(bootstrap::readLauncherEnvironment(false).masterAddr, "10.1.2.3");
  env.set("MASTER_ADDR", "");
  env.set("SLURM_STEP_NODELIST", "gpu[3-");
  expectInvalid({"SLURM_STEP_NODELIST", "gpu[3-"});
}

// RINGLET_JOB_SECRET_FILE: a 0600 regular file of this user holding hex; anything else is refused
// by name, never read.
TEST(BootstrapEnvironment, SecretFileMustBeThisUsersAndPrivate) {
  const std::string dir = testing::makeTempDir("ringlet-secret-file");
  const std::string path = dir + "/secret";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("  000102030405060708090a0b0c0d0e0f\n", f);
    std::fclose(f);
  }
  EnvGuard env;
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  env.set("RINGLET_JOB_SECRET_FILE", path);
  auto read = [&] {
    config::reloadEnvironment();
    return Bootstrap::fromEnvironment().secret;
  };
  auto refused = [&](const std::string& needle) {
    try {
      read();
      ADD_FAILURE() << "accepted; wanted an error with '" << needle << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  refused("mode 0644");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  std::string want;
  for (char c = 0; c < 16; ++c) want += c;
  EXPECT_EQ(read(), want);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  env.set("RINGLET_JOB_SECRET_FILE", fifo);
  refused("not a regular file");
  const std::string link = dir + "/link";
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  env.set("RINGLET_JOB_SECRET_FILE", link);
  refused("cannot open");
  std::filesystem::remove_all(dir);
}

TEST(BootstrapEnvironment, MalformedValuesNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::vector<std::string> needles;
  };
  const std::map<std::string, std::string> torch = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::map<std::string, std::string> changes) {
    auto vars = torch;
    for (auto& [k, v] : changes) vars[k] = v;
    return vars;
  };
  const std::vector<Case> cases = {
      {with({{"RANK", "one"}}), {"RANK", "one"}},
      {with({{"RANK", "2"}}), {"RANK", "'2'"}},
      {with({{"RANK", "-1"}}), {"RANK", "-1"}},
      {with({{"WORLD_SIZE", "0"}}), {"WORLD_SIZE", "0"}},
      {with({{"WORLD_SIZE", "2x"}}), {"WORLD_SIZE", "2x"}},
      {with({{"MASTER_PORT", "70000"}}), {"MASTER_PORT", "70000"}},
      {with({{"MASTER_PORT", "0"}}), {"MASTER_PORT", "0"}},
      {with({{"MASTER_PORT", "http"}}), {"MASTER_PORT", "http"}},
      {with({{"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}}), {"LOCAL_RANK", "3"}},
      {with({{"LOCAL_WORLD_SIZE", "5"}}), {"LOCAL_WORLD_SIZE", "5"}},
      {{{"RANK", "0"}}, {"WORLD_SIZE"}},
      {{{"WORLD_SIZE", "2"}}, {"RANK"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, {"MASTER_ADDR"}},
      {{{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
       {"OMPI_COMM_WORLD_RANK", "x"}},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "many"}}, {"SLURM_NTASKS", "many"}},
      {with({{"RINGLET_JOB_SECRET", "abc"}}), {"RINGLET_JOB_SECRET"}},
      {with({{"RINGLET_JOB_SECRET", "zz"}}), {"RINGLET_JOB_SECRET"}},
      {with({{"RINGLET_JOB_SECRET", "00ff10ab"}}), {"RINGLET_JOB_SECRET", "at least 16 bytes"}},
      {with({{"RINGLET_JOB_SECRET", std::string(32, 'a')}, {"RINGLET_JOB_SECRET_FILE", "/x"}}),
       {"both set"}},
      {with({{"RINGLET_JOB_SECRET_FILE", "/nonexistent/secret"}}), {"RINGLET_JOB_SECRET_FILE"}},
      // No secret: a store for the network is refused on every rank, naming what to set.
      {with({{"MASTER_ADDR", "10.11.12.13"}}), {"MASTER_ADDR=10.11.12.13", "RINGLET_JOB_SECRET"}},
      {with({{"RANK", "1"}, {"MASTER_ADDR", "10.11.12.13"}}), {"RINGLET_JOB_SECRET_FILE"}},
      {with({{"RINGLET_STORE_ADDR", "nocolon"}}), {"RINGLET_STORE_ADDR", "nocolon"}},
  };
  for (const auto& c : cases) {
    EnvGuard env;
    std::string trace;
    for (const auto& [k, v] : c.vars) {
      env.set(k, v);
      trace += k + "=" + v + " ";
    }
    SCOPED_TRACE(trace);
    try {
      config::reloadEnvironment();
      Bootstrap::fromEnvironment();
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      for (const auto& n : c.needles) {
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "message '" << e.what() << "' does not contain '" << n << "'";
      }
    }
  }
}

}  // namespace
}  // namespace ringlet
