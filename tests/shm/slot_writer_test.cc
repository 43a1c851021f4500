// SlotWriter (transports/shm/slot_writer.h): every write copies its bytes exactly, whichever way;
// the way chosen follows the timings recorded (synthetic ones here, so nothing depends on the
// machine's speed).
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "transports/shm/slot_writer.h"

namespace {

using ringlet::transport::shm::SlotWriter;

std::vector<std::byte> pattern(size_t bytes, int seed) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

TEST(SlotWriter, EveryWriteCopiesItsBytesExactly) {
  SlotWriter writer;
  // Below the timed size, at it, past it by a byte, at odd offsets, and many in a row (so probes
  // of the other way come and go, and either way may be the one taken).
  const size_t sizes[] = {0,
                          1,
                          SlotWriter::kTimedFromBytes - 1,
                          SlotWriter::kTimedFromBytes,
                          SlotWriter::kTimedFromBytes + 1,
                          SlotWriter::kTimedFromBytes + 4093,
                          size_t{512} << 10};
  int seed = 0;
  for (int round = 0; round < 3 * static_cast<int>(SlotWriter::kProbeEvery); ++round) {
    for (size_t bytes : sizes) {
      for (size_t dstOffset : {size_t{0}, size_t{16}, size_t{7}}) {
        const std::vector<std::byte> src = pattern(bytes + 3, ++seed);
        std::vector<std::byte> dst(bytes + dstOffset + 64, std::byte{0xEE});
        writer.write(dst.data() + dstOffset, src.data() + 3, bytes);
        for (size_t i = 0; i < dstOffset; ++i) ASSERT_EQ(dst[i], std::byte{0xEE}) << i;
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(dst[dstOffset + i], src[3 + i])
              << "byte " << i << " of " << bytes << " at offset " << dstOffset;
        }
        for (size_t i = dstOffset + bytes; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], std::byte{0xEE}) << "past the end: " << i;
        }
      }
    }
  }
  // Both ways were timed by now: the first timed write probes the way not taken.
  EXPECT_GT(writer.secondsPerByte(SlotWriter::kOrdinary), 0);
  EXPECT_GT(writer.secondsPerByte(SlotWriter::kStreaming), 0);
}

// Each way timed kMinTimings times at `ordinary` and `streaming` seconds per MiB.
SlotWriter timed(double ordinary, double streaming) {
  SlotWriter writer;
  for (unsigned i = 0; i < SlotWriter::kMinTimings; ++i) {
    writer.record(SlotWriter::kOrdinary, 1 << 20, ordinary);
    writer.record(SlotWriter::kStreaming, 1 << 20, streaming);
  }
  return writer;
}

TEST(SlotWriter, OrdinaryUntilBothWaysAreTimedEnough) {
  SlotWriter writer;
  EXPECT_EQ(writer.mode(), SlotWriter::kOrdinary);
  // Streaming 100x faster, but each way timed fewer than kMinTimings times: one timing of a
  // fresh link decides nothing.
  for (unsigned i = 0; i + 1 < SlotWriter::kMinTimings; ++i) {
    writer.record(SlotWriter::kOrdinary, 1 << 20, 1e-3);
    writer.record(SlotWriter::kStreaming, 1 << 20, 1e-5);
    EXPECT_EQ(writer.mode(), SlotWriter::kOrdinary) << "after " << i + 1 << " timings each";
  }
  writer.record(SlotWriter::kOrdinary, 1 << 20, 1e-3);
  EXPECT_EQ(writer.mode(), SlotWriter::kOrdinary);
  writer.record(SlotWriter::kStreaming, 1 << 20, 1e-5);
  EXPECT_EQ(writer.mode(), SlotWriter::kStreaming);
}

TEST(SlotWriter, AFreshWriterProbesTheOtherWayUntilItIsTimedEnough) {
  SlotWriter writer;
  std::vector<std::byte> src(SlotWriter::kTimedFromBytes * 4), dst(src.size());
  for (unsigned i = 0; i < SlotWriter::kMinTimings; ++i) {
    writer.write(dst.data(), src.data(), src.size());
  }
  EXPECT_EQ(writer.timings(SlotWriter::kOrdinary), SlotWriter::kMinTimings);
  EXPECT_EQ(writer.timings(SlotWriter::kStreaming), SlotWriter::kMinTimings);
}

TEST(SlotWriter, StreamsOnlyWhereItIsClearlyFaster) {
  // Faster, but not by kMargin: the reader's cost (reading from memory) outweighs it.
  EXPECT_EQ(timed(100e-6, 100e-6 / SlotWriter::kMargin * 1.05).mode(), SlotWriter::kOrdinary);
  EXPECT_EQ(timed(100e-6, 100e-6 / SlotWriter::kMargin * 0.9).mode(), SlotWriter::kStreaming);
}

TEST(SlotWriter, FollowsAPlacementThatChanges) {
  // Ordinary stores slow (lines owned across dies), then fast again: the choice turns each way
  // within a few timings.
  SlotWriter writer = timed(40e-6, 50e-6);
  ASSERT_EQ(writer.mode(), SlotWriter::kOrdinary);
  int timings = 0;
  while (writer.mode() == SlotWriter::kOrdinary && timings < 20) {
    writer.record(SlotWriter::kOrdinary, 1 << 20, 200e-6);
    ++timings;
  }
  EXPECT_EQ(writer.mode(), SlotWriter::kStreaming);
  EXPECT_LE(timings, 6);
  timings = 0;
  while (writer.mode() == SlotWriter::kStreaming && timings < 20) {
    writer.record(SlotWriter::kOrdinary, 1 << 20, 40e-6);
    ++timings;
  }
  EXPECT_EQ(writer.mode(), SlotWriter::kOrdinary);
  EXPECT_LE(timings, 8);
}

TEST(SlotWriter, OnePreemptedWriteDoesNotTurnTheChoice) {
  SlotWriter writer = timed(40e-6, 50e-6);
  writer.record(SlotWriter::kOrdinary, 1 << 20, 4e-3);  // 100x: the scheduler took the core
  EXPECT_EQ(writer.mode(), SlotWriter::kOrdinary);
  EXPECT_LE(writer.secondsPerByte(SlotWriter::kOrdinary),
            (1 + SlotWriter::kWeight * (SlotWriter::kOutlier - 1)) * 40e-6 / (1 << 20) * 1.001);
}

}  // namespace
