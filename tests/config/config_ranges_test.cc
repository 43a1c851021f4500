// Every RINGLET_* variable of the core, and the shm transport's size, is range-checked: a value
// out of range is an InvalidArgument naming the variable, the value and the allowed range, never
// a silent default, a zero deadline or an overflow later on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/config.h"
#include "transports/shm/shm_transport.h"

namespace ringlet {
namespace {

// Sets one variable for the life of the object and re-reads the environment both ways.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
    config::reloadEnvironment();
  }

 private:
  const char* name_;
  std::string old_;
};

// Runs `parse` with `name`=`value` and expects an InvalidArgument containing every needle.
template <typename Parse>
void expectRejected(const char* name, const char* value, std::initializer_list<std::string> needles,
                    Parse&& parse) {
  ScopedVariable v(name, value);
  try {
    parse();
    ADD_FAILURE() << name << "=" << value << " was accepted";
  } catch (const InvalidArgument& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << e.what() << "' does not contain '" << needle << "'";
    }
  }
}

void expectCoreRejects(const char* name, const char* value,
                       std::initializer_list<std::string> needles) {
  expectRejected(name, value, needles, [] { config::reloadEnvironment(); });
}

TEST(ConfigRanges, TimeoutBelowOneMillisecondIsRejectedNotRoundedToZero) {
  expectCoreRejects("RINGLET_TIMEOUT", "0.0001",
                    {"RINGLET_TIMEOUT='0.0001'", "allowed: 0.001 to 1e+07 seconds"});
  expectCoreRejects("RINGLET_TIMEOUT", "1e8", {"RINGLET_TIMEOUT", "out of range"});
  expectCoreRejects("RINGLET_TIMEOUT", "1e999", {"RINGLET_TIMEOUT", "not a number of seconds"});
  expectCoreRejects("RINGLET_TIMEOUT", "-3", {"RINGLET_TIMEOUT", "allowed"});
  expectCoreRejects("RINGLET_TIMEOUT", "5s", {"RINGLET_TIMEOUT", "not a number of seconds"});
  ScopedVariable ok("RINGLET_TIMEOUT", "0.001");
  config::reloadEnvironment();
  EXPECT_EQ(config::environment().timeout, std::chrono::milliseconds(1));
}

TEST(ConfigRanges, UnknownDebugLevelIsRejected) {
  expectCoreRejects("RINGLET_DEBUG", "bogus",
                    {"RINGLET_DEBUG='bogus'", "NONE, OFF, WARN, INFO, DEBUG, TRACE"});
  ScopedVariable ok("RINGLET_DEBUG", "info");  // any case
  config::reloadEnvironment();
  EXPECT_EQ(config::environment().debug, "info");
}

TEST(ConfigRanges, SegmentAndSlotSizesAreBounded) {
  expectCoreRejects("RINGLET_SEGMENT_BYTES", "1",
                    {"RINGLET_SEGMENT_BYTES='1'", "allowed: 64 to 1G bytes"});
  expectCoreRejects("RINGLET_SEGMENT_BYTES", "2G", {"RINGLET_SEGMENT_BYTES", "64 to 1G"});
  expectCoreRejects("RINGLET_SEGMENT_BYTES", "99999999999999999999",
                    {"RINGLET_SEGMENT_BYTES", "is not a size"});
  expectCoreRejects("RINGLET_SEGMENT_BYTES", "16777216T", {"RINGLET_SEGMENT_BYTES", "not a size"});
  expectCoreRejects("RINGLET_CUDA_SLOT_BYTES", "8", {"RINGLET_CUDA_SLOT_BYTES", "64 to 1G"});
}

TEST(ConfigRanges, CudaChoicesAreNamed) {
  expectCoreRejects("RINGLET_CUDA_PATH", "p2p",
                    {"RINGLET_CUDA_PATH=p2p", "not one of auto, ipc, staged"});
  expectCoreRejects("RINGLET_CUDA_STAGED_BELOW", "2G", {"RINGLET_CUDA_STAGED_BELOW", "0 to 1G"});
  expectCoreRejects("RINGLET_CUDA_BLOCK_ROUTE", "pairwise",
                    {"RINGLET_CUDA_BLOCK_ROUTE=pairwise", "not one of auto, direct, ring"});
  EXPECT_EQ(cuda::DeviceOptions::fromEnvironment().blockRoute, cuda::BlockRoute::kAuto);
  for (auto want : {cuda::BlockRoute::kDirect, cuda::BlockRoute::kRing}) {
    ScopedVariable v("RINGLET_CUDA_BLOCK_ROUTE", std::string(cuda::toString(want)).c_str());
    config::reloadEnvironment();
    EXPECT_EQ(cuda::DeviceOptions::fromEnvironment().blockRoute, want);
  }
}

TEST(ConfigRanges, StoreQuotasAreBounded) {
  expectCoreRejects("RINGLET_STORE_MAX_KEYS", "0",
                    {"RINGLET_STORE_MAX_KEYS='0'", "allowed: 1 to 1073741824"});
  expectCoreRejects("RINGLET_STORE_MAX_KEYS", "many", {"RINGLET_STORE_MAX_KEYS", "whole number"});
  expectCoreRejects("RINGLET_STORE_MAX_CONNECTIONS", "2G",
                    {"RINGLET_STORE_MAX_CONNECTIONS", "out of range"});
  expectCoreRejects("RINGLET_STORE_MAX_BYTES", "1K",
                    {"RINGLET_STORE_MAX_BYTES='1K'", "allowed: 64K to 1T bytes"});
  EXPECT_EQ(config::storeQuotas().maxKeys, TcpStoreQuotas{}.maxKeys);
  ScopedVariable keys("RINGLET_STORE_MAX_KEYS", "1K");
  ScopedVariable bytes("RINGLET_STORE_MAX_BYTES", "64M");
  config::reloadEnvironment();
  EXPECT_EQ(config::storeQuotas().maxKeys, 1024u);
  EXPECT_EQ(config::storeQuotas().maxBytes, size_t{64} << 20);
  EXPECT_EQ(config::storeQuotas().maxConnectionsPerHost, TcpStoreQuotas{}.maxConnectionsPerHost);
}

TEST(ConfigRanges, JobIdLongerThanTheHandshakeCarriesIsRejected) {
  const std::string id(257, 'j');
  expectCoreRejects("RINGLET_JOB_ID", id.c_str(), {"RINGLET_JOB_ID is 257 bytes", "1 to 256"});
}

TEST(ConfigRanges, CostModelSecondsAreBounded) {
  expectCoreRejects("RINGLET_COST_MODEL", "alpha=5,beta=0,gamma=0,delta=0",
                    {"RINGLET_COST_MODEL", "'alpha=5'", "from 0 to 1"});
}

TEST(ConfigRanges, CostModelFactorsAreBounded) {
  expectCoreRejects("RINGLET_COST_MODEL", "alpha=0,beta=0,gamma=0,delta=0,memory=0.5",
                    {"RINGLET_COST_MODEL", "'memory=0.5'", "from 1 to 1000"});
  expectCoreRejects("RINGLET_COST_MODEL", "alpha=0,beta=0,gamma=0,delta=0,small=2",
                    {"RINGLET_COST_MODEL", "'small=2'", "from 0.01 to 1"});
  expectCoreRejects("RINGLET_COST_MODEL", "alpha=0,beta=0,gamma=0,delta=0,cache=-1",
                    {"RINGLET_COST_MODEL", "'cache=-1'"});
  expectCoreRejects("RINGLET_COST_MODEL", "alpha=0,beta=0,gamma=0,delta=0,linkmemory=0.9",
                    {"RINGLET_COST_MODEL", "'linkmemory=0.9'", "from 1 to 1000"});
}

// 2^63 per direction made the segment size wrap to almost nothing (and the first write crashed).
TEST(ConfigRanges, ShmBytesAreBoundedSoTheSegmentSizeCannotOverflow) {
  auto shm = [] { transport::shm::ShmOptions::fromEnvironment(); };
  expectRejected("RINGLET_SHM_BYTES", "9223372036854775808",
                 {"RINGLET_SHM_BYTES='9223372036854775808'", "allowed: 2560 to 1T bytes"}, shm);
  expectRejected("RINGLET_SHM_BYTES", "2T", {"RINGLET_SHM_BYTES", "2560 to 1T"}, shm);
  // 512 was the documented minimum, but every call header (304 bytes) must fit one slot: 2 KiB
  // failed at the first call with "exceeds the shm link's maxMessageBytes (256)".
  expectRejected("RINGLET_SHM_BYTES", "2K", {"RINGLET_SHM_BYTES", "2560 to 1T"}, shm);
  ScopedVariable ok("RINGLET_SHM_BYTES", "2560");
  EXPECT_EQ(transport::shm::ShmOptions::fromEnvironment().slotBytes, 320u);
}

// A communicator made from a bad environment fails at once with the variable's name.
TEST(ConfigRanges, CommunicatorOptionsFromABadEnvironmentNameTheVariable) {
  expectRejected("RINGLET_DEBUG", "loud", {"RINGLET_DEBUG"}, [] {
    config::reloadEnvironment();
    CommunicatorOptions::fromEnvironment();
  });
}

}  // namespace
}  // namespace ringlet
