// ringlet-info runs, names the version, and its --json output parses with the expected parts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ringlet/version.h"
#include "tests/launcher/tool_process.h"

namespace ringlet::testing {
namespace {

const std::string kInfo = std::string(RINGLET_BIN_DIR) + "/ringlet-info";

TEST(Info, PrintsVersionAndHost) {
  ToolResult r = runTool({kInfo});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ringlet " + version() + "\n", 0), 0u) << r.out;
  for (const char* part : {"transports:", "hostname:", "topology", "network interfaces:",
                           "between local ranks:", "TCP listening address:"}) {
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
  EXPECT_EQ(choice["tcp_listen_address"], "127.0.0.1");
}

TEST(Info, BadOptionIsOneClearError) {
  ToolResult r = runTool({kInfo, "--no-such-option"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err.rfind("ringlet: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace ringlet::testing
