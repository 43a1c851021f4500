// ringlet-run under faults: the launcher killed with SIGKILL while ranks run under `sh -c`, a
// reader of its stdout that stops reading, a failing rank whose last words come late, and
// Ctrl-C while ranks hold shared-memory segments they have not yet unlinked.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "src/launcher/options.h"
#include "src/launcher/shm_cleanup.h"
#include "tests/launcher/tool_process.h"
#include "tests/support/ranks.h"
#include "transports/shm/shm_segment.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

const std::string kRun = std::string(RINGLET_BIN_DIR) + "/ringlet-run";
const std::string kProbe = LAUNCHER_PROBE;

// Pids the ranks' programs printed as "[r] pid=N".
std::set<pid_t> printedPids(const std::string& out) {
  std::set<pid_t> pids;
  std::regex pattern(R"(^\[\d+\] pid=(\d+)$)");
  for (const auto& line : splitLines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, pattern)) pids.insert(std::stoi(m[1]));
  }
  return pids;
}

bool anyAlive(const std::set<pid_t>& pids) {
  for (pid_t pid : pids) {
    // A zombie still answers kill(0); look at its state instead.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    const size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z') {
      return true;
    }
  }
  return false;
}

// The parent-death signal reaches only each rank's own process (here `sh`); the program that
// `sh -c` started must go too.
TEST(LauncherFaults, KilledLauncherTakesProgramsUnderShAlong) {
  const std::string script = kProbe + " sleep 30; echo not-reached";
  ToolProcess launcher({kRun, "-n", "2", "sh", "-c", script});
  ASSERT_TRUE(launcher.waitForOutput(
      [](const std::string& out, const std::string&) { return printedPids(out).size() == 2; },
      10s));
  kill(launcher.pid(), SIGKILL);
  ToolResult r = launcher.finish(10s);
  EXPECT_EQ(r.termSignal, SIGKILL);
  const std::set<pid_t> pids = printedPids(r.out);
  ASSERT_EQ(pids.size(), 2u) << r.out;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (anyAlive(pids) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(anyAlive(pids)) << "a program started under sh -c outlived the killed launcher";
  for (pid_t pid : pids) kill(pid, SIGKILL);  // never leave them behind, even on failure
}

// When a rank exits, what it started in its process group goes too (no orphans on success).
TEST(LauncherFaults, ChildrenLeftByARankAreStoppedWhenTheJobEnds) {
  const std::string script = "(" + kProbe + " sleep 30 &) ; sleep 0.3";
  ToolResult r = runTool({kRun, "-n", "1", "sh", "-c", script}, 20s);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  const std::set<pid_t> pids = printedPids(r.out);
  ASSERT_EQ(pids.size(), 1u) << r.out;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (anyAlive(pids) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(anyAlive(pids)) << "a rank's child outlived the job";
  for (pid_t pid : pids) kill(pid, SIGKILL);
}

// A reader of the launcher's stdout that never reads must not keep it from timing out: the
// launcher used to block in write() and never reach its deadline.
TEST(LauncherFaults, BlockedStdoutReaderDoesNotStallTheLauncher) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  const std::string errPath = makeTempDir("launcher-blocked") + "/err";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(err, STDERR_FILENO);
    execl(kRun.c_str(), kRun.c_str(), "-n", "2", "--timeout", "1", "--grace", "0.5", "sh", "-c",
          "while :; do echo flooding-the-launchers-stdout-with-lines-nobody-reads; done",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);  // out[0] stays open and is never read
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  close(out[0]);
  std::ifstream errFile(errPath);
  const std::string err((std::istreambuf_iterator<char>(errFile)), {});
  ASSERT_NE(done, 0) << "ringlet-run never ended while its stdout was not read";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), launcher::kExitTimeout) << err;
  EXPECT_NE(err.find("job timed out after 1 s"), std::string::npos) << err;
  std::filesystem::remove_all(std::filesystem::path(errPath).parent_path());
}

// Rank 1 fails at once (as a rank does when its peer aborts); rank 0 explains the failure a
// moment later. Its explanation must reach the output: the launcher used to SIGTERM it at once.
TEST(LauncherFaults, LateErrorTextOfAnotherRankIsKept) {
  const std::string dir = makeTempDir("launcher-late");
  // Rank 1 fails once rank 0 runs; rank 0 explains 0.1 s later.
  const std::string script = "if [ \"$RANK\" = 0 ]; then touch " + dir +
                             "/up; sleep 0.1; echo 'rank 0 root cause: disk full' >&2; exit 3; "
                             "else while [ ! -e " +
                             dir + "/up ]; do sleep 0.01; done; exit 1; fi";
  ToolResult r = runTool({kRun, "-n", "2", "sh", "-c", script});
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  EXPECT_NE(r.err.find("[0] rank 0 root cause: disk full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ringlet: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the other ranks ended on their own"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// Rank 0 fails first (as a TCP peer of a killed rank does: it sees the connection end at once),
// rank 1 is killed a moment later: the line names the killed rank, the cause.
TEST(LauncherFaults, RankKilledBySignalIsNamedEvenWhenASurvivorExitedFirst) {
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then exit 3; else sleep 0.2; kill -9 $$; sleep 5; fi";
  ToolResult r = runTool({kRun, "-n", "2", "sh", "-c", script});
  EXPECT_EQ(r.exitCode, launcher::kExitRankFailed) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(ringlet: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\))")))
      << r.err;
}

// The launcher's name for a job's segments is the shm transport's.
TEST(LauncherFaults, SegmentPrefixMatchesTheShmTransportNames) {
  for (const std::string& job :
       std::vector<std::string>{"host-123-abcdef", "odd name/with:chars", std::string(100, 'x')}) {
    const std::string name = transport::shm::segmentName(job, 0, 3);
    EXPECT_EQ(name.rfind(launcher::segmentPrefix(job), 0), 0u) << name << " for job " << job;
  }
}

// Ctrl-C while ranks hold segments (here made by the ranks under the names the transport
// uses): the launcher removes the job's segments, and nothing else.
TEST(LauncherFaults, CtrlCRemovesTheJobsSharedMemorySegments) {
  const std::string dir = makeTempDir("launcher-shm");
  const std::string other = dir + "/ringlet-another-job-0-1-0000000000000000";
  std::ofstream(other) << "x";
  const std::string outside = makeTempDir("launcher-shm-outside") + "/target";
  std::ofstream(outside) << "x";
  // A link with the job's prefix must not be followed (its target is not the job's).
  const std::string script =
      "touch \"$RINGLET_SHM_DIR/ringlet-$RINGLET_JOB_ID-$RANK-9-0123456789abcdef\" && "
      "ln -s " +
      outside + " \"$RINGLET_SHM_DIR/ringlet-$RINGLET_JOB_ID-$RANK-link\" && " + kProbe +
      " sleep 30";
  setenv("RINGLET_SHM_DIR", dir.c_str(), 1);
  ToolProcess launcher({kRun, "-n", "2", "sh", "-c", script});
  unsetenv("RINGLET_SHM_DIR");
  auto count = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path() != other;
    return n;
  };
  ASSERT_TRUE(launcher.waitForOutput(
      [&](const std::string& out, const std::string&) {
        return printedPids(out).size() == 2 && count() == 4;
      },
      10s));
  kill(launcher.pid(), SIGINT);
  ToolResult r = launcher.finish(10s);
  EXPECT_EQ(r.exitCode, 130) << r.err;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path());
  // The links are not regular files: left alone, like the other job's segment.
  EXPECT_EQ(left.size(), 3u);
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(outside));
  for (const auto& path : left) {
    EXPECT_TRUE(path == other || path.find("-link") != std::string::npos) << path;
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(std::filesystem::path(outside).parent_path());
}

}  // namespace
}  // namespace ringlet::testing
