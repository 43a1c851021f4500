// glibc's memcpy of 64 KiB on one core, by the offset of src and dst from a page.
//   g++ -O2 -o memcpy_offsets memcpy_offsets.cc && ./memcpy_offsets
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main() {
  constexpr size_t kBytes = 64 << 10;
  constexpr size_t kRoom = (4 << 20) + 4096;
  auto* src0 = static_cast<char*>(aligned_alloc(4096, kRoom));
  auto* dst0 = static_cast<char*>(aligned_alloc(4096, kRoom));
  memset(src0, 1, kRoom);
  memset(dst0, 0, kRoom);
  const int offsets[][2] = {{0, 0}, {16, 16}, {16, 0}, {0, 16}, {0, 32},
                            {0, 8}, {0, 48},  {0, 64}, {32, 0}, {0, 1}};
  for (const auto& [srcOffset, dstOffset] : offsets) {
    const char* src = src0 + srcOffset;
    char* dst = dst0 + dstOffset;
    const int copies = (64 << 20) / kBytes;
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < copies; ++k) {
      memcpy(dst, src, kBytes);
      asm volatile("" : : "r"(dst) : "memory");
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    printf("src+%2d dst+%2d: %.1f GB/s\n", srcOffset, dstOffset, kBytes * copies / seconds / 1e9);
  }
}
