#include "blas_setup.h"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

namespace trainer {

std::string blasCoreName() {
  const char* name = openblas_get_corename();
  std::string s = name != nullptr ? name : "unknown";
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void setBlasThreads(int threads) { openblas_set_num_threads(threads); }
int blasThreads() { return openblas_get_num_threads(); }

void maybeReexecWithFasterBlas(char** argv, std::string* note) {
  const std::string core = blasCoreName();
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set != nullptr) {
    *note = fmt::format("OpenBLAS core {} (OPENBLAS_CORETYPE={} set by the caller)", core, set);
    return;
  }
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const std::set<std::string> kAvx512Cores{"skylakex", "cooperlake", "sapphirerapids"};
  static const std::set<std::string> kAvx2Cores{"haswell", "zen", "skylakex", "cooperlake",
                                                "sapphirerapids"};
  const char* want = nullptr;
  if (avx512 && !kAvx512Cores.count(core)) want = "SkylakeX";
  if (!avx512 && avx2 && !kAvx2Cores.count(core)) want = "Haswell";
  if (want == nullptr) {
    *note = fmt::format("OpenBLAS core {} (matches this CPU)", core);
    return;
  }
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);
  // Only reached when exec failed: carry on with the slower kernels.
  unsetenv("OPENBLAS_CORETYPE");
  *note = fmt::format("OpenBLAS core {}; re-executing with OPENBLAS_CORETYPE={} failed: {}", core,
                      want, std::strerror(errno));
}

}  // namespace trainer
