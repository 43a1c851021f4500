// A program for ringlet-run to start in tests. Each mode exercises one thing the launcher does:
//   env                      print the launcher's variables on one line, exit 0
//   fail DIR RANK CODE       every rank prints its pid and checks in under DIR; once all have,
//                            rank RANK exits with CODE and the others sleep 30 s
//   signal DIR RANK SIG      the same, but rank RANK kills itself with signal SIG
//   ignore-term DIR RANK     the same as fail with code 1, and every rank ignores SIGTERM (it
//                            prints "got SIGTERM" for each one and goes on)
//   fail-starts N RANK       print the env line; rank RANK exits 3 in the job's first N starts
//                            (TORCHELASTIC_RESTART_COUNT < N), every other rank exits 0
//   sleep SECONDS            print the pid and sleep
//   output                   "out-line\n" and the partial "out-partial" on stdout, "err-line\n"
//                            on stderr
//   affinity                 print the CPUs this rank may run on ("cpus=0-1")
//   store                    add 1 to a counter in the launcher's store, wait until every rank
//                            has, print "store ok count=N"
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/auth.h"
#include "src/info/topology.h"
#include "src/net/socket.h"

namespace {

using namespace std::chrono_literals;

std::string env(const char* name) {
  const char* value = std::getenv(name);  // the probe reads what the launcher set, directly
  return value != nullptr ? value : "<unset>";
}

int envInt(const char* name) { return std::atoi(env(name).c_str()); }

void say(const std::string& line) {
  std::string text = line + "\n";
  [[maybe_unused]] ssize_t n = write(STDOUT_FILENO, text.data(), text.size());
}

// SIGTERM handler of ignore-term: says so (write is async-signal-safe) and goes on.
void reportSigterm(int) {
  static const char kLine[] = "got SIGTERM\n";
  [[maybe_unused]] ssize_t n = write(STDOUT_FILENO, kLine, sizeof(kLine) - 1);
}

[[noreturn]] void sleepThenExit(std::chrono::milliseconds duration) {
  std::this_thread::sleep_for(duration);
  std::_Exit(0);
}

// Prints the pid, checks in under `dir`, and waits (10 s at most) until every rank has.
void checkInAndWait(const std::string& dir) {
  say("pid=" + std::to_string(getpid()));
  int size = envInt("WORLD_SIZE");
  std::string mine = dir + "/rank" + env("RANK");
  int fd = open(mine.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    int present = 0;
    for (int r = 0; r < size; ++r) {
      present += std::filesystem::exists(dir + "/rank" + std::to_string(r)) ? 1 : 0;
    }
    if (present == size) return;
    std::this_thread::sleep_for(10ms);
  }
  std::fprintf(stderr, "probe: not every rank checked in under %s within 10 s\n", dir.c_str());
  std::_Exit(3);
}

// The launcher's store; it admits only clients that prove the job secret it handed out.
std::shared_ptr<ringlet::Store> launcherStore() {
  auto [host, port] = ringlet::net::splitHostPort(env("RINGLET_STORE_ADDR"), "RINGLET_STORE_ADDR");
  return ringlet::connectTcpStore(
      host, port,
      {.timeout = 5s,
       .connectTimeout = 5s,
       .secret = ringlet::auth::decodeHexSecret(env("RINGLET_JOB_SECRET"), "RINGLET_JOB_SECRET")});
}

int storeMode() {
  auto store = launcherStore();
  int size = envInt("WORLD_SIZE");
  store->add("probe/arrived", 1);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    int64_t count = store->add("probe/arrived", 0);
    if (count == size) {
      say("store ok count=" + std::to_string(count));
      return 0;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::fprintf(stderr, "probe: store counter never reached %d\n", size);
  return 4;
}

// Sets `count` keys of its own in the launcher's store; prints how many were stored, and the
// error that stopped it.
int storeKeysMode(int count) {
  auto store = launcherStore();
  int stored = 0;
  try {
    for (; stored < count; ++stored) store->set("probe/key" + std::to_string(stored), {});
  } catch (const ringlet::Error& e) {
    say("stored " + std::to_string(stored) + ": " + e.what());
    return 5;
  }
  say("stored " + std::to_string(stored));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  int rank = envInt("RANK");
  if (mode == "env") {
    std::string line;
    for (const char* name :
         {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
          "RINGLET_STORE_ADDR", "RINGLET_JOB_ID", "RINGLET_JOB_SECRET",
          "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"}) {
      line += std::string(line.empty() ? "" : " ") + name + "=" + env(name);
    }
    say(line);
    return 0;
  }
  if (mode == "fail-starts" && argc == 4) {
    say("start=" + env("TORCHELASTIC_RESTART_COUNT") + " of " + env("TORCHELASTIC_MAX_RESTARTS") +
        " job=" + env("RINGLET_JOB_ID"));
    return rank == std::atoi(argv[3]) && envInt("TORCHELASTIC_RESTART_COUNT") < std::atoi(argv[2])
               ? 3
               : 0;
  }
  if ((mode == "fail" || mode == "signal") && argc == 5) {
    checkInAndWait(argv[2]);
    if (rank == std::atoi(argv[3])) {
      if (mode == "fail") return std::atoi(argv[4]);
      raise(std::atoi(argv[4]));
      return 5;  // the signal did not end the process
    }
    sleepThenExit(30s);
  }
  if (mode == "ignore-term" && argc == 4) {
    struct sigaction action {};
    action.sa_handler = reportSigterm;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    checkInAndWait(argv[2]);
    if (rank == std::atoi(argv[3])) return 1;
    sleepThenExit(30s);
  }
  if (mode == "sleep" && argc == 3) {
    say("pid=" + std::to_string(getpid()));
    sleepThenExit(std::chrono::milliseconds(static_cast<int64_t>(std::atof(argv[2]) * 1000)));
  }
  if (mode == "output") {
    say("out-line");
    std::fputs("err-line\n", stderr);
    std::fflush(stderr);
    [[maybe_unused]] ssize_t n = write(STDOUT_FILENO, "out-partial", 11);
    return 0;
  }
  if (mode == "affinity") {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    say("cpus=" + ringlet::info::cpuListText(cpus));
    return 0;
  }
  if (mode == "store") return storeMode();
  if (mode == "store-keys" && argc == 3) return storeKeysMode(std::atoi(argv[2]));
  std::fprintf(stderr, "probe: unknown mode or arguments: %s\n", mode.c_str());
  return 64;
}
