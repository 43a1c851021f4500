// ringlet-run, driven as a user would: start launcher_probe on a few ranks and check the exit
// status, the one-line reason, the environment each rank saw, and that no rank outlives the job.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "src/info/topology.h"
#include "src/launcher/options.h"
#include "src/net/socket.h"
#include "tests/launcher/tool_process.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

const std::string kRun = std::string(RINGLET_BIN_DIR) + "/ringlet-run";
const std::string kProbe = LAUNCHER_PROBE;

std::vector<std::string> run(std::vector<std::string> args) {
  args.insert(args.begin(), kRun);
  return args;
}

// "[r] pid=N" lines of the probe, by rank.
std::map<int, pid_t> rankPids(const std::string& out) {
  std::map<int, pid_t> pids;
  std::regex pattern(R"(^\[(\d+)\] pid=(\d+)$)");
  for (const auto& line : splitLines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, pattern)) pids[std::stoi(m[1])] = std::stoi(m[2]);
  }
  return pids;
}

void expectAllGone(const std::map<int, pid_t>& pids) {
  for (const auto& [rank, pid] : pids) {
    EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH)
        << "rank " << rank << " pid " << pid << " is still alive";
  }
}

// The "ringlet: ..." lines on stderr.
std::vector<std::string> launcherLines(const std::string& err) {
  std::vector<std::string> lines;
  for (const auto& line : splitLines(err)) {
    if (line.rfind("ringlet: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// Whether connect() may draw `port` as a local port (net.ipv4.ip_local_port_range).
bool isEphemeral(int port) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 32768, hi = 60999;
  range >> lo >> hi;
  return lo <= port && port <= hi;
}

// MASTER_PORT is bound by the program only after it imports its libraries (seconds for PyTorch):
// an ephemeral port could meanwhile be taken by any connect() on the machine.
TEST(Launcher, UnusedPortsLieOutsideTheEphemeralRangeAndAreFree) {
  std::set<uint16_t> ports;
  for (int i = 0; i < 20; ++i) {
    const uint16_t port = net::unusedPort("127.0.0.1");
    EXPECT_FALSE(isEphemeral(port)) << port;
    EXPECT_GE(port, 20000);
    EXPECT_NO_THROW(net::listenTcp("127.0.0.1", port)) << port;
    ports.insert(port);
  }
  EXPECT_GT(ports.size(), 10u);  // drawn at random: concurrent launches rarely meet
}

TEST(Launcher, EveryRankSeesItsIdentityAndTheJobsStore) {
  ToolResult r = runTool(run({"-n", "4", kProbe, "env"}));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(launcherLines(r.err).empty()) << r.err;
  std::regex pattern(
      R"(^\[(\d)\] RANK=(\d+) LOCAL_RANK=(\d+) WORLD_SIZE=(\d+) LOCAL_WORLD_SIZE=(\d+) )"
      R"(MASTER_ADDR=(\S+) MASTER_PORT=(\d+) RINGLET_STORE_ADDR=(\S+) RINGLET_JOB_ID=(\S+) )"
      R"(RINGLET_JOB_SECRET=(\S+) TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0$)");
  std::set<int> seen;
  std::set<std::string> secrets, jobIds, stores, masterPorts;
  for (const auto& line : splitLines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    int prefixRank = std::stoi(m[1]);
    EXPECT_EQ(m[2], std::to_string(prefixRank));
    EXPECT_EQ(m[3], std::to_string(prefixRank));
    EXPECT_EQ(m[4], "4");
    EXPECT_EQ(m[5], "4");
    EXPECT_EQ(m[6], "127.0.0.1");
    // MASTER_PORT is left free for the program's own rendezvous (PyTorch's env:// binds it).
    EXPECT_TRUE(m[8].str().starts_with("127.0.0.1:")) << m[8];
    EXPECT_NE(m[8], "127.0.0.1:" + m[7].str());
    EXPECT_NE(m[7], "0");
    EXPECT_FALSE(isEphemeral(std::stoi(m[7]))) << "MASTER_PORT " << m[7];
    EXPECT_TRUE(std::regex_match(m[10].str(), std::regex("[0-9a-f]{64}"))) << m[10];
    seen.insert(prefixRank);
    secrets.insert(m[10]);
    jobIds.insert(m[9]);
    stores.insert(m[8]);
    masterPorts.insert(m[7]);
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(secrets.size(), 1u);
  EXPECT_EQ(jobIds.size(), 1u);
  EXPECT_EQ(stores.size(), 1u);
  EXPECT_EQ(masterPorts.size(), 1u);

  // Another launch gets another job id and secret.
  ToolResult again = runTool(run({"-n", "1", kProbe, "env"}));
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(again.out.find(*secrets.begin()), std::string::npos);
  EXPECT_EQ(again.out.find(*jobIds.begin()), std::string::npos);
}

TEST(Launcher, RanksReachTheStoreItHosts) {
  ToolResult r = runTool(run({"-n", "3", kProbe, "store"}));
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.out.find(fmt::format("[{}] store ok count=3", rank)), std::string::npos) << r.out;
  }
}

// RINGLET_STORE_MAX_* reach the store the launcher hosts: past the quota a rank gets an error
// naming it; a value out of range is one clear error before any rank starts.
TEST(Launcher, StoreQuotasComeFromTheEnvironment) {
  ToolResult r = runTool(
      {"/usr/bin/env", "RINGLET_STORE_MAX_KEYS=5", kRun, "-n", "1", kProbe, "store-keys", "20"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_NE(r.out.find("[0] stored 5: "), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("key quota reached"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("limit 5"), std::string::npos) << r.out;

  ToolResult fits = runTool(
      {"/usr/bin/env", "RINGLET_STORE_MAX_KEYS=64", kRun, "-n", "1", kProbe, "store-keys", "20"});
  EXPECT_EQ(fits.exitCode, 0) << fits.out << fits.err;
  EXPECT_NE(fits.out.find("[0] stored 20"), std::string::npos) << fits.out;

  ToolResult bad = runTool(
      {"/usr/bin/env", "RINGLET_STORE_MAX_BYTES=1K", kRun, "-n", "1", kProbe, "store-keys", "1"});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_NE(bad.err.find("ringlet: "), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("RINGLET_STORE_MAX_BYTES='1K' is out of range"), std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.out.find("stored"), std::string::npos) << bad.out;
}

TEST(Launcher, FailingRankStopsTheOthers) {
  std::string dir = makeTempDir("launcher-fail");
  ToolResult r = runTool(run({"-n", "4", "--grace", "2", kProbe, "fail", dir, "2", "1"}));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  EXPECT_LT(r.seconds, 6.0);
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(
      std::regex_search(lines[0], std::regex(R"(^ringlet: rank 2 \(pid \d+\) exited )"
                                             R"(with status 1; stopped the other 3 ranks$)")))
      << lines[0];
  auto pids = rankPids(r.out);
  EXPECT_EQ(pids.size(), 4u) << r.out;
  expectAllGone(pids);
  std::filesystem::remove_all(dir);
}

// --max-restarts: a rank that fails in the first start is started again with every other rank,
// under a fresh job id, and sees the start's number; the job then succeeds.
TEST(Launcher, MaxRestartsStartsEveryRankAgain) {
  ToolResult r = runTool(run({"-n", "2", "--max-restarts", "3", kProbe, "fail-starts", "2", "1"}));
  EXPECT_EQ(r.exitCode, launcher::kExitOk) << r.err;
  std::map<std::string, std::set<std::string>> jobsByStart;
  std::regex pattern(R"(^\[(\d)\] start=(\d) of 3 job=(\S+)$)");
  for (const auto& line : splitLines(r.out)) {
    std::smatch m;
    if (std::regex_match(line, m, pattern)) jobsByStart[m[2]].insert(m[3]);
  }
  ASSERT_EQ(jobsByStart.size(), 3u) << r.out;  // starts 0, 1 and 2 (the last succeeds)
  std::set<std::string> jobs;
  for (const auto& [start, ids] : jobsByStart) {
    EXPECT_EQ(ids.size(), 1u) << "start " << start << ": both ranks share one job id";
    jobs.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(jobs.size(), 3u) << "every start has its own job id: " << r.out;
  const auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 4u) << r.err;
  EXPECT_NE(lines[0].find("rank 1 (pid "), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "ringlet: starting every rank again (restart 1 of 3)");
  EXPECT_EQ(lines[3], "ringlet: starting every rank again (restart 2 of 3)");
}

// Restarts used up: the last failure is the job's, with its exit status.
TEST(Launcher, MaxRestartsUsedUpEndsWithTheFailure) {
  ToolResult r = runTool(run({"-n", "2", "--max-restarts", "1", kProbe, "fail-starts", "9", "0"}));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  const auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  EXPECT_EQ(lines[1], "ringlet: starting every rank again (restart 1 of 1)");
  EXPECT_NE(lines[2].find("rank 0 (pid "), std::string::npos) << lines[2];
  EXPECT_NE(r.out.find("start=1 of 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("start=2"), std::string::npos) << r.out;
}

TEST(Launcher, RankKilledBySignalIsNamed) {
  std::string dir = makeTempDir("launcher-signal");
  ToolResult r = runTool(run({"-n", "3", kProbe, "signal", dir, "1", "9"}));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("rank 1 (pid "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("was killed by signal 9 (SIGKILL); stopped the other 2 ranks"),
            std::string::npos)
      << lines[0];
  expectAllGone(rankPids(r.out));
  std::filesystem::remove_all(dir);
}

TEST(Launcher, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  std::string dir = makeTempDir("launcher-ignore");
  ToolResult r = runTool(run({"-n", "3", "--grace", "0.5", kProbe, "ignore-term", dir, "0"}));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  EXPECT_LT(r.seconds, 5.0);
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("rank 0"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("SIGKILL after the 0.5 s grace period"), std::string::npos) << lines[0];
  auto pids = rankPids(r.out);
  EXPECT_EQ(pids.size(), 3u) << r.out;
  expectAllGone(pids);
  std::filesystem::remove_all(dir);
}

void stopLauncherWith(int sig, int expectedExit) {
  ToolProcess launcher(run({"-n", "3", kProbe, "sleep", "30"}));
  ASSERT_TRUE(launcher.waitForOutput(
      [](const std::string& out, const std::string&) { return rankPids(out).size() == 3; }, 10s));
  kill(launcher.pid(), sig);
  ToolResult r = launcher.finish(10s);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, expectedExit) << r.err;
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0], "ringlet: received " + std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") +
                          "; stopped 3 ranks");
  expectAllGone(rankPids(r.out));
}

TEST(Launcher, SigintStopsEveryRankAndExits130) { stopLauncherWith(SIGINT, 130); }
TEST(Launcher, SigtermStopsEveryRankAndExits143) { stopLauncherWith(SIGTERM, 143); }

// Two signals sent at once may arrive as one (signals of one kind do not queue), so the second
// is sent only once the ranks report the SIGTERM that the first one made the launcher send.
TEST(Launcher, SecondSignalSkipsTheGracePeriod) {
  std::string dir = makeTempDir("launcher-twice");
  // Rank -1: no rank fails; every rank ignores SIGTERM and sleeps.
  ToolProcess launcher(run({"-n", "2", "--grace", "30", kProbe, "ignore-term", dir, "-1"}));
  ASSERT_TRUE(launcher.waitForOutput(
      [](const std::string& out, const std::string&) { return rankPids(out).size() == 2; }, 10s));
  kill(launcher.pid(), SIGINT);
  ASSERT_TRUE(launcher.waitForOutput(
      [](const std::string& out, const std::string&) {
        return out.find("[0] got SIGTERM") != std::string::npos &&
               out.find("[1] got SIGTERM") != std::string::npos;
      },
      10s))
      << "the ranks never reported the SIGTERM of the first SIGINT";
  kill(launcher.pid(), SIGINT);
  ToolResult r = launcher.finish(10s);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 130) << r.err;
  EXPECT_LT(r.seconds, 8.0);
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0], "ringlet: received SIGINT; stopped 2 ranks (SIGKILL at the second signal)");
  expectAllGone(rankPids(r.out));
  std::filesystem::remove_all(dir);
}

TEST(Launcher, KilledLauncherTakesItsRanksAlong) {
  ToolProcess launcher(run({"-n", "2", kProbe, "sleep", "30"}));
  ASSERT_TRUE(launcher.waitForOutput(
      [](const std::string& out, const std::string&) { return rankPids(out).size() == 2; }, 10s));
  kill(launcher.pid(), SIGKILL);
  ToolResult r = launcher.finish(10s);
  EXPECT_EQ(r.termSignal, SIGKILL);
  // The ranks get SIGKILL from the kernel (parent-death signal) and are reaped by init.
  auto pids = rankPids(r.out);
  ASSERT_EQ(pids.size(), 2u);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  auto anyAlive = [&] {
    for (const auto& [rank, pid] : pids) {
      if (kill(pid, 0) == 0) return true;
    }
    return false;
  };
  while (anyAlive() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  expectAllGone(pids);
}

TEST(Launcher, TimeoutStopsTheJob) {
  ToolResult r = runTool(run({"-n", "2", "--timeout", "0.5", kProbe, "sleep", "30"}));
  EXPECT_EQ(r.exitCode, launcher::kExitTimeout) << r.err;
  EXPECT_LT(r.seconds, 5.0);
  auto lines = launcherLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0], "ringlet: job timed out after 0.5 s (--timeout); stopped 2 ranks");
  expectAllGone(rankPids(r.out));
}

TEST(Launcher, PrefixesLinesAndKeepsStreamsApart) {
  ToolResult r = runTool(run({"-n", "2", kProbe, "output"}));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto out = splitLines(r.out);
  auto err = splitLines(r.err);
  for (const std::string rank : {"0", "1"}) {
    std::string p = "[" + rank + "] ";
    // The partial line comes out whole, with its own newline, once the rank has exited.
    EXPECT_EQ(std::count(out.begin(), out.end(), p + "out-line"), 1) << r.out;
    EXPECT_EQ(std::count(out.begin(), out.end(), p + "out-partial"), 1) << r.out;
    EXPECT_EQ(std::count(err.begin(), err.end(), p + "err-line"), 1) << r.err;
  }
  EXPECT_EQ(out.size(), 4u) << r.out;
  EXPECT_EQ(err.size(), 2u) << r.err;
}

TEST(Launcher, NoPrefixPassesOutputThrough) {
  ToolResult r = runTool(run({"-n", "2", "--no-prefix", kProbe, "output"}));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.find('['), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out-line\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out-partial"), std::string::npos) << r.out;
  EXPECT_EQ(splitLines(r.err), (std::vector<std::string>{"err-line", "err-line"})) << r.err;
}

TEST(Launcher, MissingProgramIsOneClearError) {
  ToolResult r = runTool(run({"-n", "3", "ringlet-no-such-program-xyz", "arg"}));
  EXPECT_EQ(r.exitCode, launcher::kExitNotFound);
  EXPECT_EQ(r.out, "");
  auto lines = splitLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("ringlet: cannot execute 'ringlet-no-such-program-xyz': not found", 0),
            0u)
      << lines[0];

  ToolResult path = runTool(run({"-n", "2", "/nonexistent/dir/prog"}));
  EXPECT_EQ(path.exitCode, launcher::kExitNotFound);
  EXPECT_EQ(splitLines(path.err).size(), 1u) << path.err;
}

TEST(Launcher, NonExecutableProgramIsOneClearError) {
  std::string dir = makeTempDir("launcher-noexec");
  std::string file = dir + "/not-executable";
  std::ofstream(file) << "#!/bin/sh\necho hi\n";
  ToolResult r = runTool(run({"-n", "2", file}));
  EXPECT_EQ(r.exitCode, launcher::kExitCannotExecute);
  auto lines = splitLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("ringlet: cannot execute '" + file + "': Permission denied"),
            std::string::npos)
      << lines[0];
  std::filesystem::remove_all(dir);
}

TEST(Launcher, BadOptionsAreOneClearError) {
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  for (const Case& c : std::vector<Case>{
           {{"-n", "0", kProbe, "env"}, "-n 0"},
           {{"-n", "-3", kProbe, "env"}, "-n -3"},
           {{"-n", "2"}, "no program"},
           {{"-n", "2", "--"}, "no program"},
           {{kProbe, "env"}, "-n"},
           {{"-n", "2", "--bind", "sockets", kProbe, "env"}, "--bind 'sockets'"},
           {{"-n", "2", "--timeout", "0", kProbe, "env"}, "--timeout 0"},
           {{"-n", "2", "--grace", "-1", kProbe, "env"}, "--grace -1"},
           {{"-n", "2", "--heartbeat-timeout", "0.5", kProbe, "env"}, "--heartbeat-timeout 0.5"},
           {{"-n", "2", "--master-port", "70000", kProbe, "env"}, "--master-port 70000"},
           {{"-n", "1", "--nnodes", "0", kProbe, "env"}, "--nnodes 0"},
           {{"-n", "2", "--max-restarts", "-1", kProbe, "env"}, "--max-restarts -1"},
           {{"-n", "1", "--nnodes", "2", "--master-addr", "10.0.0.1", "--max-restarts", "1", kProbe,
             "env"},
            "restarts work on one host only"},
           {{"-n", "1", "--nnodes", "2", "--node-rank", "2", "--master-addr", "10.0.0.1", kProbe,
             "env"},
            "--node-rank 2 is outside 0..1"},
           {{"-n", "1", "--nnodes", "2", kProbe, "env"}, "needs --master-addr"},
           {{"-n", "1", "--nnodes", "2", "--rdzv-endpoint", "10.0.0.1", kProbe, "env"},
            "--rdzv-endpoint '10.0.0.1' is not host:port"},
           {{"-n", "1", "--nnodes", "2", "--rdzv_endpoint", "10.0.0.1:-5", kProbe, "env"},
            "--master-port 65536"},
           {{"-n", "1", "--rdzv-endpoint", "a:1", "--master-addr", "b", kProbe, "env"},
            "either --rdzv-endpoint or --master-addr"},
           {{"-n", "1", "--rank-order", "random", kProbe, "env"}, "--rank-order 'random'"},
       }) {
    ToolResult r = runTool(run(c.args));
    EXPECT_EQ(r.exitCode, launcher::kExitUsage) << c.mentions << ": " << r.err;
    auto lines = splitLines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("ringlet: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(c.mentions), std::string::npos) << lines[0];
  }
  ToolResult help = runTool(run({"--help"}));
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("Exit status"), std::string::npos);
}

// Several nodes need a shared secret; torchrun's spellings are accepted on the way.
TEST(Launcher, SeveralNodesWithoutASecretIsOneClearError) {
  ToolResult r = runTool(run({"--nproc_per_node", "1", "--nnodes", "2", "--node_rank", "1",
                              "--master_addr", "127.0.0.1", "--master_port", "1", kProbe, "env"}));
  EXPECT_EQ(r.exitCode, launcher::kExitUsage) << r.err;
  auto lines = splitLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("ringlet: --nnodes 2 needs the same job secret on every node", 0), 0u)
      << lines[0];
}

// A port that was free a moment ago, for a store that node 0 hosts.
uint16_t freeLoopbackPort() { return net::unusedPort("127.0.0.1"); }

// Two nodes on one machine (both on loopback): block rank order, one job id, one secret.
TEST(Launcher, TwoNodesShareOneJob) {
  const std::string secret(64, 'a');
  const std::string endpoint = fmt::format("127.0.0.1:{}", freeLoopbackPort());
  auto node = [&](int rank) {
    return std::vector<std::string>{"/usr/bin/env",
                                    "RINGLET_JOB_SECRET=" + secret,
                                    kRun,
                                    "--nnodes",
                                    "2",
                                    "--node-rank",
                                    std::to_string(rank),
                                    "--rdzv-endpoint",
                                    endpoint,
                                    "-n",
                                    "2",
                                    kProbe,
                                    "env"};
  };
  ToolProcess node1(node(1));
  ToolResult r0 = runTool(node(0), std::chrono::seconds(30));
  ToolResult r1 = node1.finish(std::chrono::seconds(30));
  ASSERT_EQ(r0.exitCode, 0) << r0.err;
  ASSERT_EQ(r1.exitCode, 0) << r1.err;
  const std::string common = fmt::format("WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1");
  std::set<std::string> jobs;
  for (const auto& [out, first] : {std::pair{r0.out, 0}, std::pair{r1.out, 2}}) {
    for (int local = 0; local < 2; ++local) {
      std::smatch m;
      const std::regex line(fmt::format(
          R"(\[{0}\] RANK={0} LOCAL_RANK={1} {2} MASTER_PORT=\d+ RINGLET_STORE_ADDR={3} )"
          R"(RINGLET_JOB_ID=(\S+) RINGLET_JOB_SECRET={4} TORCHELASTIC_RESTART_COUNT=0 )"
          R"(TORCHELASTIC_MAX_RESTARTS=0\n)",
          first + local, local, common, endpoint, secret));
      ASSERT_TRUE(std::regex_search(out, m, line)) << "rank " << first + local << ":\n" << out;
      jobs.insert(m[1]);
    }
  }
  EXPECT_EQ(jobs.size(), 1u) << "the nodes' ranks were given different job ids";
}

// Node 0 whose partner never comes: it ends, bounded by --heartbeat-timeout (the default is
// 10 s), naming the node.
TEST(Launcher, NodeThatNeverJoinsEndsTheJob) {
  const std::string endpoint = fmt::format("127.0.0.1:{}", freeLoopbackPort());
  ToolResult r =
      runTool({"/usr/bin/env", "RINGLET_JOB_SECRET=" + std::string(64, 'b'), kRun, "--nnodes", "2",
               "--rdzv-endpoint", endpoint, "--heartbeat-timeout", "2", "-n", "1", "true"},
              std::chrono::seconds(30));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  EXPECT_NE(r.err.find("ringlet: node 1 never joined the job"), std::string::npos) << r.err;
  EXPECT_GE(r.seconds, 1.9);
  EXPECT_LT(r.seconds, 8.0);
}

TEST(Launcher, ProgramArgumentsThatLookLikeOptionsAreLeftAlone) {
  ToolResult r = runTool(run({"-n", "1", "--", kProbe, "--no-such-mode", "-n"}));
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed);  // the probe itself rejects the mode
  EXPECT_NE(r.err.find("[0] probe: unknown mode or arguments: --no-such-mode"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ringlet: rank 0 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 64; no other rank was running"), std::string::npos)
      << r.err;
}

// "0-2,5" -> {0, 1, 2, 5}
std::set<int> cpuSet(const std::string& list) {
  std::set<int> cpus;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    const size_t dash = part.find('-');
    const int first = std::stoi(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

// Each rank's CPUs as the probe's "affinity" mode prints them ("[r] cpus=0-1").
std::map<int, std::set<int>> affinities(const std::string& out) {
  std::map<int, std::set<int>> found;
  std::regex line(R"(^\[(\d+)\] cpus=(\S+)$)");
  for (const auto& l : splitLines(out)) {
    std::smatch m;
    if (std::regex_match(l, m, line)) found[std::stoi(m[1])] = cpuSet(m[2]);
  }
  return found;
}

// By default (--bind auto) ranks that fit the host's cores get a share each, disjoint, and
// say nothing about it; more ranks than cores are left unpinned, as --bind none leaves them.
TEST(Launcher, DefaultBindingGivesRanksThatFitTheCoresDisjointShares) {
  const int cores = static_cast<int>(info::usableCores(info::discoverTopology()).size());
  ToolResult unpinned = runTool(run({"-n", "1", "--bind", "none", kProbe, "affinity"}));
  ASSERT_EQ(unpinned.exitCode, 0) << unpinned.err;
  const std::set<int> all = affinities(unpinned.out).at(0);

  const int fit = std::min(cores, 2);
  ToolResult r = runTool(run({"-n", std::to_string(fit), kProbe, "affinity"}));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err.find("bound to"), std::string::npos) << r.err;
  const std::map<int, std::set<int>> shares = affinities(r.out);
  ASSERT_EQ(shares.size(), static_cast<size_t>(fit)) << r.out;
  std::set<int> covered;
  for (const auto& [rank, cpus] : shares) {
    EXPECT_FALSE(cpus.empty()) << rank;
    for (int cpu : cpus) {
      EXPECT_TRUE(all.count(cpu)) << "rank " << rank << " on cpu " << cpu;
      EXPECT_TRUE(covered.insert(cpu).second) << "cpu " << cpu << " given twice";
    }
  }
  EXPECT_EQ(covered, all);  // every core is some rank's

  ToolResult over = runTool(run({"-n", std::to_string(cores + 1), kProbe, "affinity"}));
  ASSERT_EQ(over.exitCode, 0) << over.err;
  const std::map<int, std::set<int>> free = affinities(over.out);
  ASSERT_EQ(free.size(), static_cast<size_t>(cores + 1)) << over.out;
  for (const auto& [rank, cpus] : free) EXPECT_EQ(cpus, all) << rank;
}

TEST(Launcher, BindCoresPinsEachRankToTheCoreItReports) {
  ToolResult r = runTool(run({"-n", "3", "--bind", "cores", kProbe, "affinity"}));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::map<int, std::string> reported;
  std::regex bound(R"(^ringlet: rank (\d+) bound to core (\d+) \(cpu (\S+)\)$)");
  for (const auto& line : splitLines(r.err)) {
    std::smatch m;
    if (std::regex_match(line, m, bound)) reported[std::stoi(m[1])] = m[3];
  }
  ASSERT_EQ(reported.size(), 3u) << r.err;
  for (const auto& [rank, cpus] : reported) {
    EXPECT_NE(r.out.find(fmt::format("[{}] cpus={}\n", rank, cpus)), std::string::npos)
        << "rank " << rank << " expected cpus " << cpus << "\n"
        << r.out;
  }
}

}  // namespace
}  // namespace ringlet::testing
