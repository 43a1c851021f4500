#pragma once
// Whether this machine has a CUDA device, asked in a forked child so that the test process itself
// never initialises CUDA (CUDA does not survive fork: a process that initialised it cannot fork
// ranks that use it).

#include <string>

namespace ringlet::testing {

struct GpuProbe {
  int devices = 0;
  std::string reason;  // why there is none, when devices == 0
};

// Cached after the first call.
const GpuProbe& probeGpus();

}  // namespace ringlet::testing

// Skips the current test, with the reason, unless at least `n` CUDA devices are present.
#define RINGLET_SKIP_WITHOUT_GPUS(n)                                                       \
  do {                                                                                     \
    const auto& ringletProbe = ::ringlet::testing::probeGpus();                            \
    if (ringletProbe.devices < (n)) {                                                      \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << ringletProbe.devices \
                   << (ringletProbe.reason.empty() ? "" : ": " + ringletProbe.reason);     \
    }                                                                                      \
  } while (0)
