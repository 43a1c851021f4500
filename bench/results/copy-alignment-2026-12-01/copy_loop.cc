// glibc's memcpy against a loop of 16-byte loads and stores (kernels::copy's), dst at + 0 and
// + 16 from a page, src at a page, one core.
//   g++ -O2 -o copy_loop copy_loop.cc && ./copy_loop
#include <emmintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

void loopCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i x[4];
    for (int k = 0; k < 4; ++k)
      x[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16 * k));
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16 * k), x[k]);
  }
  memcpy(d + i, s + i, n - i);
}

int main() {
  auto* src = static_cast<char*>(aligned_alloc(4096, 4 << 20));
  auto* dst0 = static_cast<char*>(aligned_alloc(4096, (4 << 20) + 4096));
  memset(src, 1, 4 << 20);
  memset(dst0, 0, (4 << 20) + 4096);
  for (int offset : {0, 16}) {
    for (size_t n : {size_t{4096}, size_t{65536}, size_t{262144}, size_t{1} << 20}) {
      char* dst = dst0 + offset;
      const int copies = static_cast<int>((64 << 20) / n);
      for (int loop = 0; loop < 2; ++loop) {
        const auto start = std::chrono::steady_clock::now();
        for (int k = 0; k < copies; ++k) {
          if (loop == 1) {
            loopCopy(dst, src, n);
          } else {
            memcpy(dst, src, n);
          }
          asm volatile("" : : "r"(dst) : "memory");
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        printf("dst+%2d %7zu bytes %s %.1f GB/s\n", offset, n, loop ? "loop  " : "memcpy",
               n * static_cast<double>(copies) / seconds / 1e9);
      }
    }
  }
}
