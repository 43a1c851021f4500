#include "src/launcher/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

namespace ringlet::launcher {
namespace {

constexpr const char* kFooter = R"(
Each rank gets in its environment:
  RANK, LOCAL_RANK          this rank (0..n-1; one host, so both are equal)
  WORLD_SIZE, LOCAL_WORLD_SIZE
                            n
  MASTER_ADDR, MASTER_PORT  a free port for the program's own rendezvous (PyTorch's env://
                            starts its TCPStore there, as under torchrun); --master-port
  RINGLET_STORE_ADDR        the rendezvous store that ringlet-run hosts, as host:port
  RINGLET_JOB_ID            unique per launch
  RINGLET_JOB_SECRET        64 hex digits (32 random bytes), shared by the ranks of this job
Every other variable of ringlet-run's environment is passed on unchanged.

Output: with prefixing (the default) every line a rank writes is prefixed with "[rank] "; stdout
and stderr stay apart. Partial lines are held until their newline or until the rank exits.
Standard input goes to rank 0 unless it is a terminal; the other ranks read /dev/null.

Failure: when a rank exits non-zero or is killed by a signal, ringlet-run sends SIGTERM to every
other rank (and its process group), waits --grace seconds, sends SIGKILL to what is left, and
prints one line naming the rank. SIGINT, SIGTERM or SIGHUP to ringlet-run stop the ranks the same
way (a second signal skips the grace period). Ranks die with the launcher if it is killed.

Exit status:
  0         every rank exited 0
  1         a rank exited non-zero or was killed by a signal
  2         bad command line
  124       --timeout expired
  126       the program exists but cannot be executed
  127       the program was not found
  128+N     ringlet-run received signal N (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)
)";

std::chrono::milliseconds toMillis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

ParseResult usageError(const std::string& message) {
  std::fprintf(stderr, "ringlet: %s (see ringlet-run --help)\n", message.c_str());
  return {std::nullopt, kExitUsage};
}

}  // namespace

ParseResult parseOptions(int argc, char** argv) {
  CLI::App app{
      "ringlet-run -n N [options] [--] program [args...]\n\n"
      "Starts N local ranks of a program, hosts their rendezvous store, forwards their output\n"
      "and stops them all when one fails.",
      "ringlet-run"};
  app.footer(kFooter);
  app.prefix_command();  // the first positional and everything after it belong to the program

  LaunchOptions options;
  std::string bind = "none";
  double timeoutSeconds = 0;
  double graceSeconds = 5;
  bool noPrefix = false;
  int port = 0;
  app.add_option("-n,--nproc,--nproc-per-node", options.nproc, "Number of ranks to start")
      ->required();
  app.add_option("--master-addr", options.masterAddr,
                 "Address the rendezvous store listens on (default 127.0.0.1)");
  app.add_option("--master-port", port, "MASTER_PORT for the ranks (default 0: a free port)");
  app.add_flag("--no-prefix", noPrefix,
               "Do not prefix output lines; ranks inherit stdout and stderr directly");
  app.add_option("--bind", bind, "none | cores: pin rank r to core r mod (number of cores)");
  app.add_option("--timeout", timeoutSeconds,
                 "Whole-job wall-clock limit in seconds; on expiry every rank is stopped");
  app.add_option("--grace", graceSeconds,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (default 5)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return {std::nullopt, kExitOk};
  } catch (const CLI::ParseError& e) {
    return usageError(e.what());
  }

  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) return usageError("no program given to run");
  if (options.command.front().empty()) return usageError("the program name is empty");
  if (options.nproc < 1 || options.nproc > kMaxRanks) {
    return usageError(fmt::format("-n {}: the number of ranks must be between 1 and {}",
                                  options.nproc, kMaxRanks));
  }
  if (port < 0 || port > 65535) {
    return usageError(fmt::format("--master-port {} is not a port (0..65535)", port));
  }
  options.masterPort = static_cast<uint16_t>(port);
  if (options.masterAddr.empty()) return usageError("--master-addr is empty");
  if (bind == "none") {
    options.bind = BindMode::kNone;
  } else if (bind == "cores") {
    options.bind = BindMode::kCores;
  } else {
    return usageError(fmt::format("--bind '{}' is not one of: none, cores", bind));
  }
  if (app.count("--timeout") > 0) {
    if (!std::isfinite(timeoutSeconds) || timeoutSeconds <= 0 || timeoutSeconds > 1e7) {
      return usageError(
          fmt::format("--timeout {} is not a positive number of seconds", timeoutSeconds));
    }
    options.timeout = toMillis(timeoutSeconds);
  }
  if (!std::isfinite(graceSeconds) || graceSeconds < 0 || graceSeconds > 3600) {
    return usageError(
        fmt::format("--grace {} is not a number of seconds between 0 and 3600", graceSeconds));
  }
  options.grace = toMillis(graceSeconds);
  options.prefixOutput = !noPrefix;
  return {std::move(options), kExitOk};
}

}  // namespace ringlet::launcher
