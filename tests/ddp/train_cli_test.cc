// ringlet-train under ringlet-run as real processes: a short data-parallel run whose rank-0
// checkpoint a single process resumes, and a rank SIGKILLed mid-training, after which the
// launcher must report it and every process must be gone within 15 s.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/ranks.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
const std::string kBin = RINGLET_BIN_DIR;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts argv with stdout and stderr going to `log`; returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `limit` for pid; returns its wait status or -1 after killing it.
int waitFor(pid_t pid, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(20ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Children of `parent` (from /proc), with the RANK each was given.
std::vector<std::pair<pid_t, int>> childRanks(pid_t parent) {
  std::vector<std::pair<pid_t, int>> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = readFile("/proc/" + name + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid != parent) continue;
    std::string env = readFile("/proc/" + name + "/environ");
    for (size_t at = 0; at < env.size(); at = env.find('\0', at) + 1) {
      if (env.compare(at, 5, "RANK=") == 0)
        out.emplace_back(std::stoi(name), std::atoi(&env[at + 5]));
      if (env.find('\0', at) == std::string::npos) break;
    }
  }
  return out;
}

bool alive(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  auto close = stat.rfind(')');
  return close != std::string::npos && stat[close + 2] != 'Z';
}

TEST(TrainCli, TwoRanksCheckpointResumesInOneProcess) {
  const std::string dir = ringlet::testing::makeTempDir("ddp-cli");
  const std::string log = dir + "/run.log", ck = dir + "/ck.bin";
  pid_t pid = spawn({kBin + "/ringlet-run", "-n", "2", kBin + "/ringlet-train", "--model", "mlp",
                     "--steps", "30", "--plot", "", "--csv", dir + "/loss.csv", "--checkpoint", ck,
                     "--no-progress", "--json", dir + "/speed.json"},
                    log);
  int status = waitFor(pid, 60s);
  std::string out = readFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("data parallel over 2 ranks"), std::string::npos) << out;
  EXPECT_EQ(out.find("[1] step"), std::string::npos) << "rank 1 logged:\n" << out;
  // --json: the median step after warm-up (30 steps: 3 warm-up), samples/s over both ranks.
  const nlohmann::json speed = nlohmann::json::parse(readFile(dir + "/speed.json"));
  EXPECT_EQ(speed.at("ranks"), 2);
  EXPECT_EQ(speed.at("steps_timed"), 27);
  const double stepMs = speed.at("step_ms"), perSecond = speed.at("samples_per_s");
  EXPECT_GT(stepMs, 0);
  EXPECT_NEAR(perSecond, 2.0 * speed.at("batch_per_rank").get<double>() * 1000 / stepMs,
              1e-6 * perSecond);
  pid = spawn({kBin + "/ringlet-train", "--model", "mlp", "--steps", "32", "--plot", "", "--csv",
               dir + "/loss1.csv", "--resume", ck, "--no-progress"},
              dir + "/resume.log");
  status = waitFor(pid, 60s);
  out = readFile(dir + "/resume.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// --threads-as-ranks 3 trains exactly as 3 processes under ringlet-run: the same loss curve, bit
// for bit (same data shards, same reductions), over the in-process transport.
TEST(TrainCli, ThreadRanksTrainExactlyAsProcessRanks) {
  const std::string dir = ringlet::testing::makeTempDir("ddp-threads");
  const std::vector<std::string> args = {"--model", "mlp",    "--steps", "40",           "--seed",
                                         "5",       "--plot", "",        "--no-progress"};
  auto with = [&](std::vector<std::string> head, const std::string& csv) {
    head.insert(head.end(), args.begin(), args.end());
    head.insert(head.end(), {"--csv", csv});
    return head;
  };
  pid_t pid = spawn(with({kBin + "/ringlet-train", "--threads-as-ranks", "3"}, dir + "/t.csv"),
                    dir + "/threads.log");
  int status = waitFor(pid, 60s);
  std::string out = readFile(dir + "/threads.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("data parallel over 3 thread ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("local"), std::string::npos) << "not the in-process transport:\n" << out;
  pid = spawn(with({kBin + "/ringlet-run", "-n", "3", kBin + "/ringlet-train"}, dir + "/p.csv"),
              dir + "/processes.log");
  status = waitFor(pid, 60s);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(dir + "/processes.log");
  const std::string threads = readFile(dir + "/t.csv"), processes = readFile(dir + "/p.csv");
  EXPECT_GT(threads.size(), 100u);
  EXPECT_EQ(threads, processes);
  std::filesystem::remove_all(dir);
}

// Inside a launched job the option makes no sense: refused by name.
TEST(TrainCli, ThreadRanksInsideALaunchedJobAreRefused) {
  const std::string dir = ringlet::testing::makeTempDir("ddp-threads-refused");
  pid_t pid = spawn({kBin + "/ringlet-run", "-n", "2", kBin + "/ringlet-train", "--model", "mlp",
                     "--steps", "5", "--threads-as-ranks", "2", "--plot", "", "--no-progress"},
                    dir + "/run.log");
  const int status = waitFor(pid, 60s);
  const std::string out = readFile(dir + "/run.log");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << out;
  EXPECT_NE(out.find("ringlet: --threads-as-ranks 2 inside a launched job"), std::string::npos)
      << out;
  std::filesystem::remove_all(dir);
}

TEST(TrainCli, KilledRankIsReportedAndEveryProcessExitsWithin15s) {
  const std::string dir = ringlet::testing::makeTempDir("ddp-kill");
  const std::string log = dir + "/run.log";
  pid_t launcher = spawn({kBin + "/ringlet-run",
                          "-n",
                          "3",
                          kBin + "/ringlet-train",
                          "--model",
                          "bert",
                          "--hidden",
                          "32",
                          "--heads",
                          "2",
                          "--ffn",
                          "64",
                          "--seq",
                          "16",
                          "--batch",
                          "4",
                          "--steps",
                          "100000",
                          "--log-every",
                          "1",
                          "--eval-every",
                          "100000",
                          "--plot",
                          "",
                          "--csv",
                          dir + "/loss.csv",
                          "--no-progress"},
                         log);
  // Wait until training runs (rank 0 logged a step), then kill rank 1.
  auto deadline = Clock::now() + 60s;
  while (readFile(log).find("step      3") == std::string::npos && Clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  auto ranks = childRanks(launcher);
  ASSERT_EQ(ranks.size(), 3u) << readFile(log);
  pid_t victim = -1;
  for (auto [pid, rank] : ranks)
    if (rank == 1) victim = pid;
  ASSERT_GT(victim, 0);
  auto killedAt = Clock::now();
  kill(victim, SIGKILL);
  int status = waitFor(launcher, 15s);
  const double secs = std::chrono::duration<double>(Clock::now() - killedAt).count();
  const std::string out = readFile(log);
  ASSERT_NE(status, -1) << "launcher still running 15 s after the kill:\n" << out;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << out;
  for (auto [pid, rank] : ranks) EXPECT_FALSE(alive(pid)) << "rank " << rank << " still alive";
  EXPECT_NE(out.find("rank 1"), std::string::npos) << out;
  std::printf("every process gone %.2f s after SIGKILL of rank 1; launcher said:\n%s\n", secs,
              out.substr(out.size() > 1200 ? out.size() - 1200 : 0).c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace
