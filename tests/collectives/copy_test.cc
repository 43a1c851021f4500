// kernels::copy: the data path's memcpy (where dst and src lie differently within 64 bytes,
// memcpy or a loop, whichever this process measured faster). Every byte lands, at every offset of
// either end, and nothing beyond it, through copy() and through the loop alone.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/reduce.h"
#include "kernels/turns.h"

namespace ringlet::kernels {
namespace {

void checkEveryOffset(void (*copy)(void*, const void*, size_t), const char* name) {
  SCOPED_TRACE(name);
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

TEST(Copy, EveryByteLandsAtEveryOffsetAndNothingBeyond) {
  checkEveryOffset(&copy, "copy");
  checkEveryOffset(&copyLoop, "copyLoop");
}

// The choice between memcpy and the loop is a measurement's: both timed, the faster taken, once
// per process.
TEST(Copy, ApartCopiesRunWhicheverWayWasMeasuredFaster) {
  EXPECT_TRUE(ApartCopy::loopPays(2e-6, 1e-6));
  EXPECT_FALSE(ApartCopy::loopPays(1e-6, 2e-6));
  EXPECT_FALSE(ApartCopy::loopPays(1e-6, 1e-6));  // a tie: memcpy
  EXPECT_FALSE(ApartCopy::loopPays(1e-6, 0));     // not timed
  const ApartCopy measured = measureApartCopy();
  EXPECT_GT(measured.memcpySeconds, 0);
  EXPECT_GT(measured.loopSeconds, 0);
  EXPECT_LT(measured.memcpySeconds, 0.1);  // 64 KiB each
  EXPECT_LT(measured.loopSeconds, 0.1);
  EXPECT_EQ(measured.loop, ApartCopy::loopPays(measured.memcpySeconds, measured.loopSeconds));
  const ApartCopy& once = apartCopy();
  EXPECT_EQ(&once, &apartCopy());
  EXPECT_EQ(once.loop, ApartCopy::loopPays(once.memcpySeconds, once.loopSeconds));
}

// Two ways timed in turns: each first in every other round, the fastest of each kept.
TEST(FastestInTurns, KeepsEachWaysFastestAndTakesTurnsGoingFirst) {
  std::string order;
  const double firstTimes[] = {3, 1, 2};
  const double secondTimes[] = {5, 6, 4};
  int a = 0, b = 0;
  const auto [first, second] = fastestInTurns(
      3,
      [&] {
        order += 'a';
        return firstTimes[a++];
      },
      [&] {
        order += 'b';
        return secondTimes[b++];
      });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 4);
  EXPECT_EQ(order, "abbaab");
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
