// Whether the kernel's copy between processes pays on this host.
//
// Lent messages and direct writes (shm_link.h) move a message with one copy made by the kernel
// (process_vm_readv / process_vm_writev), where the slots move it with two memcpy calls, one on
// each side. Which is faster depends on the host: on a 16-core Xeon the kernel's copy halved
// all-gather, all-to-all and sendrecv times from 256 KiB on; on a 2-core AMD EPYC VM, where a
// kernel copy of 256 KiB took 3.8x a memcpy's time, the same calls took 1.5-2x longer lent than
// through the slots (transports/shm/README.md, "When the kernel's copy pays"). So under
// RINGLET_SHM_DIRECT=auto each process times both once, on its own memory, and links between
// processes use the kernel's copy only where it costs at most the two copies it replaces.
#pragma once

namespace ringlet::transport::shm {

struct KernelCopy {
  bool permitted = false;    // process_vm_readv of this process's own memory worked
  double kernelSeconds = 0;  // one kProbeBytes copy by process_vm_readv, best of kProbeRounds
  double memcpySeconds = 0;  // the same copy with memcpy
  static constexpr unsigned long kProbeBytes = 256ul << 10;  // half of a default slot
  static constexpr int kProbeRounds = 8;

  // Permitted, and the kernel's one copy takes at most the two memcpy calls of the slots.
  bool pays() const { return permitted && kernelPays(kernelSeconds, memcpySeconds); }
  static bool kernelPays(double kernelSeconds, double memcpySeconds) {
    return kernelSeconds > 0 && memcpySeconds > 0 && kernelSeconds <= 2 * memcpySeconds;
  }
};

// Times both copies now (about 0.2 ms on a 2-core VM).
KernelCopy measureKernelCopy();
// measureKernelCopy() once per process, at the first call; later calls return that.
const KernelCopy& kernelCopy();

}  // namespace ringlet::transport::shm
