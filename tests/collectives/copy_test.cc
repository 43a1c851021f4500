// kernels::copy: the data path's memcpy (the vector loop where dst and src lie differently
// within 64 bytes). Every byte lands, at every offset of either end, and nothing beyond it.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "kernels/reduce.h"

namespace ringlet::kernels {
namespace {

TEST(Copy, EveryByteLandsAtEveryOffsetAndNothingBeyond) {
  constexpr size_t kGuard = 64;
  const size_t sizes[] = {0, 1, 15, 63, 64, 255, 256, 257, 1000, 4096 + 3, 65536 + 17};
  std::vector<std::byte> src(65536 + 17 + 2 * kGuard + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  for (size_t bytes : sizes) {
    for (size_t srcOffset : {0, 1, 8, 16, 32, 48, 63}) {
      for (size_t dstOffset = 0; dstOffset <= 64; dstOffset += (bytes > 4096 ? 8 : 1)) {
        std::vector<std::byte> dst(bytes + 2 * kGuard + 64, std::byte{0xab});
        std::byte* to = dst.data() + kGuard + dstOffset;
        const std::byte* from = src.data() + kGuard + srcOffset;
        copy(to, from, bytes);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(to[i], from[i])
              << bytes << " bytes, src +" << srcOffset << ", dst +" << dstOffset << ": byte " << i;
        }
        for (std::byte* p = dst.data(); p < to; ++p) {
          ASSERT_EQ(*p, std::byte{0xab})
              << "written before dst: " << bytes << " bytes, dst +" << dstOffset;
        }
        for (std::byte* p = to + bytes; p < dst.data() + dst.size(); ++p) {
          ASSERT_EQ(*p, std::byte{0xab})
              << "written past dst: " << bytes << " bytes, dst +" << dstOffset;
        }
      }
    }
  }
}

// reduceStreaming: the sum lands in `stream` and in `copy`, with the copy's stores ordinary or
// streamed alike, for counts that end mid-tile and at odd offsets; nothing beyond either.
TEST(ReduceStreaming, BothOutputsHoldTheResultWhicheverWayTheCopyIsWritten) {
  constexpr size_t kGuard = 16;
  for (bool streamCopyToo : {false, true}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{2048}, size_t{2048 * 3 + 7}}) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {  // floats off 16-byte alignment
        std::vector<float> a(count), b(count);
        for (size_t i = 0; i < count; ++i) {
          a[i] = static_cast<float>(i % 97);
          b[i] = static_cast<float>(3 * (i % 89)) + 0.5f;
        }
        std::vector<float> stream(count + offset + kGuard, -1.0f),
            copy(count + offset + kGuard, -2.0f);
        reduceStreaming(stream.data() + offset, copy.data() + offset, a.data(), b.data(), count,
                        DataType::kFloat32, ReduceOp::kSum, 1, streamCopyToo);
        for (size_t i = 0; i < stream.size(); ++i) {
          const bool inside = i >= offset && i < offset + count;
          const float want = inside ? a[i - offset] + b[i - offset] : -1.0f;
          ASSERT_EQ(stream[i], want) << "stream, count " << count << ", element " << i;
          ASSERT_EQ(copy[i], inside ? want : -2.0f)
              << "copy (" << (streamCopyToo ? "streamed" : "ordinary") << "), count " << count
              << ", element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringlet::kernels
