// ringlet-info runs, names the version, and its --json output parses with the expected parts.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "ringlet/version.h"
#include "tests/launcher/tool_process.h"
#include "transports/progress.h"

namespace ringlet::testing {
namespace {

const std::string kInfo = std::string(RINGLET_BIN_DIR) + "/ringlet-info";

// Sets a variable for the tools this test starts; unsets it again afterwards.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedVariable() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Info, PrintsVersionAndHost) {
  ToolResult r = runTool({kInfo});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ringlet " + version() + "\n", 0), 0u) << r.out;
  for (const char* part :
       {"transports (highest priority first):", "hostname:", "topology", "network interfaces:",
        "between local ranks:", "tcp: listens on 127.0.0.1", "RINGLET_SHM_DIR="}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
}

TEST(Info, JsonParsesAndAgreesWithTheLibrary) {
  ToolResult r = runTool({kInfo, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);  // throws on malformed output
  EXPECT_EQ(report["version"], version());
  ASSERT_TRUE(report["transports"].is_array());
  ASSERT_TRUE(report["topology"].is_object());
  EXPECT_GE(report["topology"]["pus"].get<int>(), 1);
  EXPECT_GE(report["topology"]["cores"].get<int>(), 1);
  ASSERT_TRUE(report["network"].is_array());
  bool loopback = false;
  for (const auto& iface : report["network"]) loopback = loopback || iface["loopback"].get<bool>();
  EXPECT_TRUE(loopback);
  const auto& choice = report["choice"];
  std::string local = choice["local_transport"];
  EXPECT_TRUE(local == "shm" || local == "tcp") << local;
  // Each transport describes itself: tcp names where it listens, and lists its own options.
  bool tcp = false;
  for (const auto& t : report["transports"]) {
    if (t["name"] != "tcp") continue;
    tcp = true;
    EXPECT_TRUE(t["available"].get<bool>());
    EXPECT_NE(t["status"].get<std::string>().find("127.0.0.1"), std::string::npos) << t;
    std::vector<std::string> envs;
    for (const auto& o : t["options"]) envs.push_back(o["env"]);
    EXPECT_EQ(envs, (std::vector<std::string>{"RINGLET_SOCKET_ADDR", "RINGLET_SOCKET_IFNAME",
                                              "RINGLET_SOCKET_STREAMS", "RINGLET_SOCKET_ENCRYPT"}));
    EXPECT_NE(t["status"].get<std::string>().find("1 connection per rank pair"), std::string::npos)
        << t;
  }
  EXPECT_TRUE(tcp) << report["transports"];
}

TEST(Info, AlgorithmsAreListedAndForcedOnesShown) {
  ScopedVariable algo("RINGLET_ALGO", "allgather:bruck");
  ToolResult r = runTool({kInfo});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (const char* part :
       {"allreduce: recursive_doubling, rabenseifner, ring", "alltoall: pairwise, bruck",
        "reducescatter: ring, recursive_halving", "allgather: bruck (forced by RINGLET_ALGO)"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
}

// --model starts a job of its own (through ringlet-run), measures, and prints rank 0's view.
TEST(Info, ModelIsMeasuredOnAJobAndChoosesPerSize) {
  ScopedVariable algo("RINGLET_ALGO", "reduce:tree");
  ToolResult r = runTool({kInfo, "--model", "-n", "3", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["ranks"], 3);
  EXPECT_GT(report["model"]["alpha_s"].get<double>(), 0);
  EXPECT_GT(report["model"]["beta_s_per_byte"].get<double>(), 0);
  ASSERT_GE(report["choice"].size(), 10u);
  EXPECT_EQ(report["choice"][0]["bytes"], 8);
  EXPECT_EQ(report["choice"][0]["allreduce"], "header_doubling");  // 8 bytes ride in headers
  const bool shareCores = transport::Backoff::usableCpus() < 3;    // the ranks' count, inherited
  EXPECT_EQ(report["model"]["ranks_share_cores"], shareCores);
  const double perCore = 3.0 / transport::Backoff::usableCpus();
  EXPECT_DOUBLE_EQ(report["model"]["ranks_per_core"].get<double>(), shareCores ? perCore : 1.0);
  // Shared memory between the ranks (the default transport on one host): 512 KiB slices.
  EXPECT_EQ(report["segment_bytes"], 512u << 10);
  for (const auto& row : report["choice"]) {
    EXPECT_EQ(row["reduce"], "tree") << row;
    // On more than two ranks the all-gather's messages are call headers up to 256 bytes, and
    // past that (each with its data after it) where the ranks share cores: 3 ranks here on the
    // CPUs this test may use, up to 2 KiB (16 KiB on more ranks). With a core each, 3 ranks take
    // none (the doubling is three messages one after another, the ring two).
    const std::string allgather = row["allgather"];
    if (shareCores && row["bytes"] <= 2048) {
      EXPECT_EQ(allgather, "header_inline") << row;
    } else {
      EXPECT_TRUE(allgather == "ring" || allgather == "bruck" || allgather == "recursive_doubling")
          << row;
    }
  }
}

#ifdef RINGLET_TEST_MPIRUN
// Under the real mpirun (rank 0 hosts the store on a port derived from Open MPI's job id): the
// tool bootstraps once. It bootstrapped twice (is this a job? then the communicator), and ranks
// that reached the first store as it closed failed: the job failed in 14 of 16 runs.
TEST(Info, ModelUnderMpirun) {
  ScopedVariable root("OMPI_ALLOW_RUN_AS_ROOT", "1");
  ScopedVariable confirm("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  ScopedVariable timeout("RINGLET_TIMEOUT", "20");
  for (int run = 0; run < 2; ++run) {
    ToolResult r = runTool({RINGLET_TEST_MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", "4",
                            kInfo, "--model", "--json"},
                           std::chrono::seconds(40));
    ASSERT_EQ(r.exitCode, 0) << "run " << run << ": " << r.err;
    nlohmann::json report = nlohmann::json::parse(r.out);  // rank 0's alone
    EXPECT_EQ(report["ranks"], 4);
    EXPECT_GT(report["model"]["alpha_s"].get<double>(), 0);
  }
}
#endif

// Over TCP on one host, ranks that outnumber the cores cut their pipelines into 4 MiB slices
// (every wait for one may cost a switch between processes); otherwise 512 KiB. An explicit
// RINGLET_SEGMENT_BYTES wins either way.
TEST(Info, TcpSlicesAreLargerWhereRanksShareCores) {
  ScopedVariable transport("RINGLET_TRANSPORT", "tcp");
  ToolResult r = runTool({kInfo, "--model", "-n", "3", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);
  const bool shareCores = transport::Backoff::usableCpus() < 3;
  ASSERT_EQ(report["model"]["ranks_share_cores"], shareCores);
  EXPECT_EQ(report["segment_bytes"], shareCores ? 4u << 20 : 512u << 10);
  ScopedVariable segment("RINGLET_SEGMENT_BYTES", "256K");
  r = runTool({kInfo, "--model", "-n", "3", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["segment_bytes"], 256u << 10);
}

TEST(Info, ShowsATransportOptionFromTheEnvironment) {
  ScopedVariable address("RINGLET_SOCKET_ADDR", "127.0.0.2");
  ToolResult r = runTool({kInfo, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& t : report["transports"]) {
    if (t["name"] != "tcp") continue;
    EXPECT_NE(t["status"].get<std::string>().find("127.0.0.2"), std::string::npos) << t;
    for (const auto& o : t["options"]) {
      if (o["key"] == "socket_addr") seen = o["value"] == "127.0.0.2";
    }
  }
  EXPECT_TRUE(seen) << report["transports"];
}

TEST(Info, UnknownTransportIsNamedWithTheBuiltInOnes) {
  ScopedVariable transport("RINGLET_TRANSPORT", "carrier-pigeon");
  ToolResult r = runTool({kInfo});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("error in the environment: transport 'carrier-pigeon'"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("auto, shm, tcp, local"), std::string::npos) << r.out;
}

TEST(Info, BadOptionIsOneClearError) {
  ToolResult r = runTool({kInfo, "--no-such-option"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err.rfind("ringlet: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace ringlet::testing
