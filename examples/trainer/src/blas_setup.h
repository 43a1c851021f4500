#pragma once
// OpenBLAS picks its kernels when it loads. Debian's 0.3.21 does not recognise some recent
// CPUs and falls back to SSE3 kernels about 5x slower than its AVX-512 ones; the choice can
// only be forced with OPENBLAS_CORETYPE set before the library loads. ringlet-train therefore
// checks at start-up and, when the CPU has AVX-512 (or AVX2) but OpenBLAS chose an older core
// and OPENBLAS_CORETYPE is unset, sets it (SkylakeX or Haswell) and re-executes itself once.
// Setting OPENBLAS_CORETYPE yourself (to anything) turns this off.

#include <string>

namespace trainer {

// Re-executes the program with OPENBLAS_CORETYPE set when that is worth it (see above); on
// return, *note says what was done or why not (for a log line).
void maybeReexecWithFasterBlas(char** argv, std::string* note);

std::string blasCoreName();
void setBlasThreads(int threads);
int blasThreads();

}  // namespace trainer
