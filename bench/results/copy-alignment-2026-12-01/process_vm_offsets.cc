// The kernel's copy (process_vm_readv of this process) of 64 KiB-1 MiB by the offset of dst from a
// page, src at a page.
//   g++ -O2 -o process_vm_offsets process_vm_offsets.cc && ./process_vm_offsets
#include <sys/uio.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
int main() {
  const pid_t self = getpid();
  char* src0 = static_cast<char*>(aligned_alloc(4096, (4 << 20) + 4096));
  char* dst0 = static_cast<char*>(aligned_alloc(4096, (4 << 20) + 4096));
  memset(src0, 1, (4 << 20) + 4096);
  memset(dst0, 0, (4 << 20) + 4096);
  for (int off : {0, 16, 8, 64})
    for (size_t n : {size_t(65536), size_t(262144), size_t(1 << 20)}) {
      int it = (128 << 20) / n;
      auto a = std::chrono::steady_clock::now();
      for (int k = 0; k < it; ++k) {
        iovec l{dst0 + off, n}, r{src0, n};
        if (process_vm_readv(self, &l, 1, &r, 1, 0) != (ssize_t)n) {
          perror("pvr");
          return 1;
        }
      }
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      printf("dst+%2d %7zu: process_vm_readv %.1f GB/s\n", off, n, n * (double)it / t / 1e9);
    }
}
