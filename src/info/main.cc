// ringlet-info: version, build options, transports, host topology and what ringlet would choose
// for a job on this host. --json prints the same as one JSON object.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "src/info/report.h"

int main(int argc, char** argv) {
  CLI::App app{
      "ringlet-info [--json]\n\nPrints ringlet's version and build options, the transports "
      "built in, this host's topology\nand network interfaces, and what ringlet would choose for "
      "a job here.",
      "ringlet-info"};
  bool asJson = false;
  app.add_flag("--json", asJson, "Print one JSON object instead of text");
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
    nlohmann::ordered_json report = ringlet::info::hostReport();
    std::string text = asJson ? report.dump(2) + "\n" : ringlet::info::renderText(report);
    std::fputs(text.c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringlet: %s\n", e.what());
    return 1;
  }
}
