// ringlet-info: version, build options, transports, host topology and what ringlet would choose
// for a job on this host. --json prints the same as one JSON object.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "src/info/model.h"
#include "src/info/report.h"

namespace {

// ringlet-info --model outside a job: runs itself under ringlet-run (next to this program).
int relaunch(const char* self, int ranks, bool asJson) {
  std::error_code error;
  const auto program = std::filesystem::canonical("/proc/self/exe", error);
  const std::string launcher = (program.parent_path() / "ringlet-run").string();
  const std::string count = std::to_string(ranks);
  std::vector<const char*> args = {launcher.c_str(), "--no-prefix", "-n",
                                   count.c_str(),    self,          "--model"};
  if (asJson) args.push_back("--json");
  args.push_back(nullptr);
  execv(launcher.c_str(), const_cast<char* const*>(args.data()));
  std::fprintf(stderr, "ringlet: cannot run %s for --model: %s\n", launcher.c_str(),
               std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringlet-info [--json]\n\nPrints ringlet's version and build options, the transports "
      "built in, this host's topology\nand network interfaces, and what ringlet would choose for "
      "a job here.",
      "ringlet-info"};
  bool asJson = false;
  bool model = false;
  int ranks = 2;
  std::string master;
  app.add_flag("--json", asJson, "Print one JSON object instead of text");
  app.add_flag("--model", model,
               "Measure the cost model on a job's links and print the algorithm each collective "
               "would use per size (started through ringlet-run -n RANKS unless a launcher "
               "started this process)");
  app.add_option("-n,--ranks", ranks, "Ranks for --model without a launcher")
      ->check(CLI::Range(2, 64));
  app.add_option("--master", master,
                 "Rendezvous address of a job across hosts (MASTER_ADDR): say which interface "
                 "reaches the other hosts from here (default: RINGLET_STORE_ADDR's host)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ringlet: %s (see ringlet-info --help)\n", e.what());
    return 2;
  }
  try {
    if (model) {
      ringlet::Bootstrap bootstrap = ringlet::Bootstrap::fromEnvironment();
      if (!ringlet::info::underLauncher(bootstrap)) return relaunch(argv[0], ranks, asJson);
      nlohmann::ordered_json report = ringlet::info::modelReport(std::move(bootstrap));
      if (report.empty()) return 0;
      std::string text = asJson ? report.dump(2) + "\n" : ringlet::info::renderModelText(report);
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    nlohmann::ordered_json report = ringlet::info::hostReport(master);
    std::string text = asJson ? report.dump(2) + "\n" : ringlet::info::renderText(report);
    std::fputs(text.c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    return 1;
  }
}
