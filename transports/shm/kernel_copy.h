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

// Times both paths now (one reader thread, about 1 ms on a 2-core VM).
KernelCopy measureKernelCopy();
// measureKernelCopy() once per process, at the first call; later calls return that.
const KernelCopy& kernelCopy();

}  // namespace ringlet::transport::shm
