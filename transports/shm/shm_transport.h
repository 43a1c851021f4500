#pragma once
// The shared-memory transport: links between ranks on one host through segments in /dev/shm.
//
// Connecting a pair (lower rank L, higher rank H), through the context's store:
//   L: checks the directory has room, creates and maps a segment, sets "shm/L-H" to its name
//      (or to "fallback:<why>" when there is no room, or "error:<why>" when creation failed).
//   H: reads "shm/L-H", maps the segment and unlinks its file, sets "shm/L-H/ack" to "ok"
//      (or "error:<why>").
//   L: reads the ack. Both sides agree on a fallback, so each returns a null link for the pair
//      and the communicator uses the next transport for it.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "transports/progress.h"
#include "transports/shm/shm_wait.h"
#include "transports/transport.h"

namespace ringlet::transport::shm {

struct ShmOptions {
  std::string dir = "/dev/shm";
  size_t slotCount = 8;
  size_t slotBytes = size_t{512} << 10;  // per slot; maxMessageBytes()
  // The wait policy of its links; unset: Backoff::forHost(context.ranksOnHost) (progress.h).
  std::optional<Backoff> backoff;
  // Direct writes and lent messages: large messages written straight into the receiver's
  // memory where it waits for them (Link::kDirectWriteMinBytes, process_vm_writev) or read by
  // the receiver out of the sender's (Link::lend, process_vm_readv). kOff: always through the
  // slots. kAuto: between thread ranks of one process and where the host's ranks outnumber its
  // cores always; between other processes where the kernel's copy pays (kernel_copy.h).
  enum class Direct { kAuto, kOn, kOff };
  Direct direct = Direct::kAuto;

  // shm_dir (RINGLET_SHM_DIR) sets dir; shm_bytes (RINGLET_SHM_BYTES, per direction) is cut
  // into slotCount slots; shm_direct (RINGLET_SHM_DIRECT) auto, 1 or 0 sets direct. Throws
  // InvalidArgument when shm_bytes is not a size or is outside slotCount x
  // Link::kMinMessageBytes .. 1 TiB, or shm_direct is none of auto, 1, 0.
  static ShmOptions fromSettings(const Settings& settings);
  // fromSettings() of the environment's RINGLET_SHM_* variables.
  static ShmOptions fromEnvironment();
};

std::unique_ptr<Transport> makeShmTransport(TransportContext context, ShmOptions options);

// Whether a link uses direct writes and lent messages under `mode`. kAuto: on between threads
// of one process and where the host's ranks outnumber its cores, else as kernelCopy() says
// (measured at the first such link; logged at INFO once).
bool directBetween(ShmOptions::Direct mode, bool sameProcess, bool ranksOutnumberCores);
// Whether such a link lends only to the pairwise all-to-all (Link::lendsForAllToAllOnly): under
// kAuto, between processes whose kernel copy does not pay, where the host's ranks outnumber its
// cores. 4 ranks on a 2-core VM whose kernel copy took 3.8x memcpy's time, idle: all-gather,
// gather, scatter and broadcast of 256 KiB-1 MiB (and all-gather of 4 MiB) 1.1-1.9x faster
// through the slots; the all-to-all level either way, and under a busy loop per core up to 2x
// faster lent (transports/shm/README.md, "When the kernel's copy pays").
bool directForAllToAllOnly(ShmOptions::Direct mode, bool sameProcess, bool ranksOutnumberCores);
// The largest block such a link lends (Link::lendBlockBytes): under kAuto between processes
// whose kernel copy pays, KernelCopy::lendBlockBytes() (measured past the cache); else any.
size_t lendBlockBytesBetween(ShmOptions::Direct mode, bool sameProcess);

// name "shm", priority 20; connects ranks with the same non-empty hostId.
TransportEntry transportEntry();

}  // namespace ringlet::transport::shm
