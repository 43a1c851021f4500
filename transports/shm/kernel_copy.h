// Whether the kernel's copy between processes pays on this host.
//
// A lent message or a direct write (shm_link.h) moves a message with one copy made by the kernel
// (process_vm_readv / process_vm_writev) on one side; the slots move it with two memcpy calls,
// the writer's from its buffer into the slot and the reader's, on another core, out of it. Which
// is faster depends on the host: on a 16-core Xeon lending made all-gather, all-to-all and
// sendrecv mostly 1.1-3.8x faster at 64 KiB-16 MiB (2, 4 ranks); on a 2-core AMD EPYC VM it made
// them 1.1-2.5x slower (transports/shm/README.md, "When the kernel's copy pays"). So under
// RINGLET_SHM_DIRECT=auto each process times both once, with two threads of its own standing
// for the two ranks (on two CPUs where it may use two), and links between processes use the
// kernel's copy only where it takes at most kShare of the slots' time: timed here it took 0.35-0.50
// of it on that Xeon and 0.99-1.97 on that VM.
#pragma once

namespace ringlet::transport::shm {

struct KernelCopy {
  bool permitted = false;  // process_vm_readv of this process's own memory worked
  bool measured = false;   // both paths were timed (within kMeasureSeconds)
  bool twoCpus = false;    // the reader ran on another CPU than the writer in every round
  // Medians of kProbeRounds, kProbeBytes that one thread wrote (once), read by another:
  double kernelSeconds = 0;  // the reader's process_vm_readv of them
  double slotsSeconds = 0;   // the writer's memcpy into a buffer and the reader's out of it
  static constexpr unsigned long kProbeBytes = 256ul << 10;  // half of a default slot
  static constexpr int kProbeRounds = 16;
  static constexpr double kMeasureSeconds = 1.0;

  // The most of the slots' time the kernel's copy may take and still be used: between the two
  // hosts' ranges above, with room on both sides.
  static constexpr double kShare = 0.85;

  // Permitted, and the kernel's one copy took at most kShare of the slots' two. Not measured (a
  // reader thread that got no core for a second): as before the measurement, true.
  bool pays() const { return permitted && (!measured || kernelPays(kernelSeconds, slotsSeconds)); }
  static bool kernelPays(double kernelSeconds, double slotsSeconds) {
    return kernelSeconds > 0 && slotsSeconds > 0 && kernelSeconds <= kShare * slotsSeconds;
  }

  // Past the cache, timed only where the probe above says the kernel's copy pays: the two
  // threads exchange kPastBytes each at once, as two ranks' all-gather of that much, either each
  // reading the other's with process_vm_readv a slot at a time (lent), or each writing its own
  // into a ring of the link's default slots (8 of 512 KiB) that the other empties. On a 2-core
  // AMD EPYC VM whose 256 KiB probe sat at the threshold (0.83 and 0.96 in two processes), the
  // lent all-gather, all-to-all and sendrecv of 8 and 64 MiB took 1.02-1.98x the slots' time
  // (bench/results/direct-past-cache-2026-12-02/); on a 16-core Xeon 0.63-0.69x at 16 MiB.
  bool pastMeasured = false;
  double kernelPastSeconds = 0;  // the fastest of kPastRounds, in turns
  double slotsPastSeconds = 0;
  static constexpr unsigned long kPastBytes = 8ul << 20;
  static constexpr unsigned long kPastSlotBytes = 512ul << 10;
  static constexpr int kPastSlots = 8;
  static constexpr int kPastRounds = 2;
  // Where the kernel's copy pays in the cache but took longer than the slots in that exchange, a
  // link lends blocks of at most this many bytes (Link::lendBlockBytes): blocks of the size
  // measured there, and larger, go through the slots; smaller ones are lent as before. On a
  // 2-core AMD EPYC VM whose memcpy of 8 MiB ran at 2-3 GB/s (32 MiB of L3), six alternating
  // pairs: the lent all-gather of 8 MiB (blocks of 4 MiB) took 0.42-0.78x the slots' time, the
  // sendrecv of 8 MiB blocks 0.72-1.41x, and this exchange 0.84-1.87x in probes beside them
  // (bench/results/lend-past-cache-2026-12-02/).
  static constexpr unsigned long kLendBelowPastBytes = kPastBytes / 2;

  // The largest block a link between processes lends under `auto`: every size where the
  // exchange past the cache was not measured or the kernel's copy took at most the slots' time
  // there, else kLendBelowPastBytes.
  unsigned long lendBlockBytes() const {
    return pastMeasured && !kernelPaysPast(kernelPastSeconds, slotsPastSeconds)
               ? kLendBelowPastBytes
               : ~0ul;
  }
  static bool kernelPaysPast(double kernelSeconds, double slotsSeconds) {
    return kernelSeconds > 0 && slotsSeconds > 0 && kernelSeconds <= slotsSeconds;
  }
};

// Whether the kernel's copy runs slower where the target lies off its source by other than a
// multiple of 64 bytes. On a 2-core AMD EPYC (AVX2) VM process_vm_readv ran at 1.5-1.9 GB/s with
// the target 8 or 16 bytes off, 8.1-8.5 at 0 and 64 (bench/results/copy-alignment-2026-12-01/),
// so a direct write there goes through the slots instead (ShmLink::sendDirect); on an AVX-512
// EPYC it ran alike at 0, 8 and 16 (12.7-19.7 GB/s), where declining cost the one copy for
// nothing (bench/results/copy-apart-2026-12-01/). Timed once per process, one thread, in the cache.
struct KernelCopyOffsets {
  bool measured = false;  // permitted, and both timed
  // The fastest of kRounds in turns: kBytes read to a target at the source's offset within 64
  // bytes, and to one 16 bytes past it.
  double alignedSeconds = 0;
  double apartSeconds = 0;
  static constexpr unsigned long kBytes = 64ul << 10;
  static constexpr int kRounds = 5;
  static constexpr double kSlower = 1.5;  // apart at most this much slower: no difference

  // Where not measured (the kernel refused: nothing is written directly anyway), as before.
  bool apartSlow() const { return !measured || apartIsSlow(alignedSeconds, apartSeconds); }
  static bool apartIsSlow(double alignedSeconds, double apartSeconds) {
    return apartSeconds > kSlower * alignedSeconds;
  }
};
// Times both now: 0.07-1.4 ms on the AVX-512 EPYC (a process's first call the dearest).
KernelCopyOffsets measureKernelCopyOffsets();
const KernelCopyOffsets& kernelCopyOffsets();  // measured once per process, at the first call

// Times both paths now (one reader thread, about 1 ms on a 2-core VM; where the kernel's copy
// pays, the exchange past the cache too: 40 MiB of memory while it runs, and 30-50 ms more on a
// 2-core VM whose memcpy of 8 MiB ran at 2-3 GB/s;
// `alwaysPastCache`: also where it does not).
KernelCopy measureKernelCopy(bool alwaysPastCache = false);
// measureKernelCopy() once per process, at the first call; later calls return that.
const KernelCopy& kernelCopy();

}  // namespace ringlet::transport::shm
