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

// Times both paths now (one reader thread, about 1 ms on a 2-core VM).
KernelCopy measureKernelCopy();
// measureKernelCopy() once per process, at the first call; later calls return that.
const KernelCopy& kernelCopy();

}  // namespace ringlet::transport::shm
