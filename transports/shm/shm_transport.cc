#include "transports/shm/shm_transport.h"

#include <sched.h>

#include <fmt/format.h>

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "src/config.h"
#include "src/log.h"
#include "transports/shm/kernel_copy.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_segment.h"

namespace ringlet::transport::shm {
namespace {

constexpr std::string_view kName = "name:";
constexpr std::string_view kFallback = "fallback:";
constexpr std::string_view kError = "error:";
constexpr std::string_view kOk = "ok";

std::string pairKey(int low, int high) { return fmt::format("shm/{}-{}", low, high); }
std::string ackKey(int low, int high) { return fmt::format("shm/{}-{}/ack", low, high); }

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Reads `key`, which `peer` sets, in short slices so that a peer that died during setup is
// reported by name within a slice (~100 ms) instead of at the deadline, as is a failure in the
// job meanwhile (`checkJob`, TransportContext::checkJob).
std::string getFromPeer(Store& store, const std::string& key, int rank, int peer,
                        const PeerWatch& watch, Deadline deadline,
                        const std::function<void(Deadline)>& whileWaiting,
                        const TransportContext::CheckJob& checkJob) {
  // Short slices where the wait has side work (TransportContext::whileConnecting).
  const std::chrono::milliseconds slice{whileWaiting ? 20 : 100};
  const Bytes value = getWatching(
      store, key, deadline, slice,
      [&] {
        if (!watch.alive()) {
          throw PeerError(peer, fmt::format("rank {} ({}) exited while rank {} waited for it to "
                                            "set '{}' during shm setup",
                                            peer, watch.describe(), rank, key));
        }
        if (whileWaiting) whileWaiting(deadline);
        if (checkJob) checkJob(deadline, std::span(&peer, 1));
      },
      [&] {
        return fmt::format("shm connect on rank {} timed out waiting for rank {} to set '{}' in {}",
                           rank, peer, key, store.describe());
      });
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(TransportContext context, ShmOptions options)
      : context_(std::move(context)),
        options_(std::move(options)),
        backoff_(options_.backoff ? *options_.backoff
                                  : Backoff::forHost(context_.ranksOnHost, context_.adaptiveWait)) {
  }

  std::string_view name() const override { return "shm"; }

  std::vector<std::unique_ptr<Link>> connect(std::span<const int> peers,
                                             Deadline deadline) override;

 private:
  PeerWatch watchPeer(int peer) const {
    const int size = static_cast<int>(context_.peers.size());
    if (context_.rank >= size || peer >= size) return PeerWatch();
    return PeerWatch(context_.peers[context_.rank], context_.peers[peer]);
  }
  std::unique_ptr<Link> makeLink(int peer, Segment segment, int side, PeerWatch watch) const {
    const bool outnumber = context_.ranksOnHost > Backoff::usableCpus();
    const bool direct = directBetween(options_.direct, watch.sameProcess(), outnumber);
    // Timed here, once per process, rather than in a caller's first direct write.
    if (direct && !watch.sameProcess()) kernelCopyOffsets();
    const bool sameProcess = watch.sameProcess();
    return std::make_unique<ShmLink>(
        context_.rank, peer, std::move(segment), side, std::move(watch), backoff_, direct,
        direct && directForAllToAllOnly(options_.direct, sameProcess, outnumber),
        lendBlockBytesBetween(options_.direct, sameProcess));
  }

  // Membarrier fences move a fence's cost from every message to every sleep (shm_wait.h): worth
  // it where waits spin first (a core per rank) and sleeps are rare. With more ranks than cores
  // waits sleep all the time, and each membarrier interrupts the cores running our other ranks
  // (measured: 4 ranks on 2 cores, small all-reduce and broadcast 1.4-2.3x slower with them).
  bool membarrierFences() const { return backoff_.spins > 0; }

  TransportContext context_;
  ShmOptions options_;
  Backoff backoff_;
};

std::vector<std::unique_ptr<Link>> ShmTransport::connect(std::span<const int> peers,
                                                         Deadline deadline) {
  const int rank = context_.rank;
  Store& store = *context_.store;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] < 0 || peers[i] >= context_.size || peers[i] == rank ||
        (i > 0 && peers[i] <= peers[i - 1])) {
      throw InvalidArgument(fmt::format(
          "shm connect on rank {}: peers[{}] = {} is not an ascending rank in [0, {}) other than "
          "this one",
          rank, i, peers[i], context_.size));
    }
  }
  const SegmentGeometry geometry{.slotCount = options_.slotCount, .slotBytes = options_.slotBytes};
  std::vector<std::unique_ptr<Link>> links(peers.size());
  std::vector<Segment> created(peers.size());

  // 1. Create the segments this rank owns (peers above it) and publish their names. Never blocks.
  for (size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    if (peer < rank) continue;
    std::string noRoom;
    try {
      created[i] = Segment::create(options_.dir, segmentName(context_.jobId, rank, peer), geometry,
                                   rank, peer, &noRoom);
    } catch (const std::exception& e) {
      store.setString(pairKey(rank, peer), std::string(kError) + e.what());
      throw;
    }
    if (created[i].valid()) {
      created[i].holdLivenessLock(/*side=*/0);
      if (membarrierFences()) created[i].offerMembarrierFences(/*side=*/0);
    }
    if (!created[i].valid()) {
      log::warn("shm: {}; ranks {} and {} fall back to the next transport", noRoom, rank, peer);
      store.setString(pairKey(rank, peer), std::string(kFallback) + noRoom);
    } else {
      store.setString(pairKey(rank, peer),
                      std::string(kName) + created[i].path().substr(options_.dir.size() + 1));
    }
  }

  // 2. Map the segments of peers below this rank and acknowledge (Segment::open checks the name
  //    and the file; the creator unlinks it).
  for (size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    if (peer > rank) continue;
    PeerWatch watch = watchPeer(peer);
    std::string value = getFromPeer(store, pairKey(peer, rank), rank, peer, watch, deadline,
                                    context_.whileConnecting, context_.checkJob);
    if (startsWith(value, kFallback)) {
      log::info("shm: rank {} reported {}; ranks {} and {} fall back to the next transport", peer,
                value.substr(kFallback.size()), peer, rank);
      continue;
    }
    if (startsWith(value, kError)) {
      throw IoError(fmt::format("shm connect: rank {} could not create the segment for rank {}: {}",
                                peer, rank, value.substr(kError.size())));
    }
    if (!startsWith(value, kName)) {
      throw IoError(
          fmt::format("shm connect: rank {} published '{}' for the pair {}-{}, not a "
                      "segment name",
                      peer, value.substr(0, 80), peer, rank));
    }
    const std::string name = value.substr(kName.size());
    Segment segment;
    try {
      segment = Segment::open(options_.dir, name, peer, rank);
    } catch (const std::exception& e) {
      store.setString(ackKey(peer, rank), std::string(kError) + e.what());
      throw;
    }
    segment.holdLivenessLock(/*side=*/1);
    if (membarrierFences()) segment.offerMembarrierFences(/*side=*/1);
    watch.watchLock(segment, /*peerSide=*/0);
    store.setString(ackKey(peer, rank), kOk);
    links[i] = makeLink(peer, std::move(segment), /*side=*/1, std::move(watch));
  }

  // 3. Wait for the peers above to have mapped what this rank created, then unlink it.
  for (size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    if (peer < rank || !created[i].valid()) continue;
    PeerWatch watch = watchPeer(peer);
    std::string ack = getFromPeer(store, ackKey(rank, peer), rank, peer, watch, deadline,
                                  context_.whileConnecting, context_.checkJob);
    if (ack != kOk) {
      throw IoError(fmt::format("shm connect: rank {} could not map the segment {} of rank {}: {}",
                                peer, created[i].path(), rank,
                                startsWith(ack, kError) ? ack.substr(kError.size()) : ack));
    }
    created[i].unlinkFile();
    watch.watchLock(created[i], /*peerSide=*/1);
    links[i] = makeLink(peer, std::move(created[i]), /*side=*/0, std::move(watch));
  }
  return links;
}

std::string describeKernelCopy(const KernelCopy& copy) {
  if (!copy.permitted) return "the kernel refuses process_vm_readv here";
  if (!copy.measured) return "the kernel's copy not measured: no core for the reader thread";
  const KernelCopyOffsets& offsets = kernelCopyOffsets();
  const std::string past =
      copy.pastMeasured
          ? fmt::format(
                "; past the cache, {} MiB each way at once: lent {:.0f} us, the slots {:.0f} us: "
                "{}",
                KernelCopy::kPastBytes >> 20, copy.kernelPastSeconds * 1e6,
                copy.slotsPastSeconds * 1e6,
                copy.lendBlockBytes() == KernelCopy::kLendBelowPastBytes
                    ? fmt::format("blocks of at most {} MiB lent",
                                  KernelCopy::kLendBelowPastBytes >> 20)
                    : std::string("blocks of any size lent"))
          : std::string();
  return fmt::format(
      "{} KiB another thread wrote: the kernel's copy {:.1f} us, the slots' two {:.1f} us: {}{}; "
      "{} KiB to a target 16 bytes off its source {:.1f} us, at its offset {:.1f} us: {}",
      KernelCopy::kProbeBytes >> 10, copy.kernelSeconds * 1e6, copy.slotsSeconds * 1e6,
      copy.pays()
          ? fmt::format("at most {:.2f} of the slots' time, the kernel's copy pays",
                        KernelCopy::kShare)
          : fmt::format("over {:.2f} of the slots' time, the slots' copies", KernelCopy::kShare),
      past, KernelCopyOffsets::kBytes >> 10, offsets.apartSeconds * 1e6,
      offsets.alignedSeconds * 1e6,
      offsets.apartSlow() ? "such direct writes go through the slots" : "no slower");
}

}  // namespace

bool directForAllToAllOnly(ShmOptions::Direct mode, bool sameProcess, bool ranksOutnumberCores) {
  return mode == ShmOptions::Direct::kAuto && !sameProcess && ranksOutnumberCores &&
         !kernelCopy().pays();
}

size_t lendBlockBytesBetween(ShmOptions::Direct mode, bool sameProcess) {
  return mode == ShmOptions::Direct::kAuto && !sameProcess && kernelCopy().pays()
             ? kernelCopy().lendBlockBytes()
             : SIZE_MAX;
}

bool directBetween(ShmOptions::Direct mode, bool sameProcess, bool ranksOutnumberCores) {
  switch (mode) {
    case ShmOptions::Direct::kOn:
      return true;
    case ShmOptions::Direct::kOff:
      return false;
    case ShmOptions::Direct::kAuto:
      break;
  }
  if (sameProcess) return true;  // a memcpy between threads either way
  // Where ranks wait for cores, a lent message is read while its sender is off the core, where
  // through the slots every slice waits for both ends to run: 4 ranks on 2 cores with a busy
  // loop per core, all-to-all 16-64 MiB took 0.55-0.7x the slots' time lent even where the
  // kernel's copy is slow (transports/shm/README.md, "When the kernel's copy pays").
  if (ranksOutnumberCores) return true;
  const KernelCopy& copy = kernelCopy();
  static const bool logged = [&] {
    log::info("shm: direct writes and lent messages between processes {} ({})",
              copy.pays() ? "on" : "off", describeKernelCopy(copy));
    return true;
  }();
  (void)logged;
  return copy.pays();
}

ShmOptions ShmOptions::fromSettings(const Settings& settings) {
  constexpr size_t kMaxShmBytes = size_t{1} << 40;
  ShmOptions options;
  if (const std::string* dir = findSetting(settings, "shm_dir")) {
    options.dir = *dir;
    while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  }
  if (const std::string* text = findSetting(settings, "shm_bytes")) {
    // Per direction: slots that hold the messages no one cuts (Link::kMinMessageBytes: the
    // call header); at most 1 TiB, so that the segment's size (two directions and the control
    // block) cannot overflow.
    const size_t bytes = config::parseSize(
        *text, "RINGLET_SHM_BYTES", options.slotCount * Link::kMinMessageBytes, kMaxShmBytes);
    const size_t slotBytes = bytes / options.slotCount / kCacheLine * kCacheLine;
    options.slotBytes = slotBytes;
  }
  if (const std::string* text = findSetting(settings, "shm_direct")) {
    if (*text != "auto" && *text != "0" && *text != "1") {
      throw InvalidArgument(
          fmt::format("RINGLET_SHM_DIRECT is '{}': it must be auto, 1 or 0", *text));
    }
    options.direct = *text == "auto" ? ShmOptions::Direct::kAuto
                     : *text == "1"  ? ShmOptions::Direct::kOn
                                     : ShmOptions::Direct::kOff;
  }
  return options;
}

ShmOptions ShmOptions::fromEnvironment() { return fromSettings(readSettings(transportEntry())); }

std::unique_ptr<Transport> makeShmTransport(TransportContext context, ShmOptions options) {
  if (options.slotCount == 0 || options.slotCount > kMaxSlots) {
    throw InvalidArgument(
        fmt::format("shm transport: slotCount {} is not in [1, {}]", options.slotCount, kMaxSlots));
  }
  if (options.slotBytes == 0 || options.slotBytes % kCacheLine != 0) {
    throw InvalidArgument(
        fmt::format("shm transport: slotBytes {} is not a positive multiple of {}",
                    options.slotBytes, kCacheLine));
  }
  if (!context.store) throw InvalidArgument("shm transport: the context has no store");
  return std::make_unique<ShmTransport>(std::move(context), std::move(options));
}

}  // namespace ringlet::transport::shm

namespace ringlet::transport::shm {

// The sizes RINGLET_SHM_DIRECT's help (below, a literal) names.
static_assert(transport::Link::kDirectWriteMinBytes == size_t{64} << 10);
static_assert(transport::Link::kLendMinBytes == size_t{16} << 10);
static_assert(KernelCopy::kLendBelowPastBytes == size_t{4} << 20);

TransportEntry transportEntry() {
  return TransportEntry{
      .name = "shm",
      .priority = 20,
      .sharesMemory = true,
      .options = {{"shm_dir", "RINGLET_SHM_DIR",
                   "directory for the segments (a tmpfs; default /dev/shm)"},
                  {"shm_bytes", "RINGLET_SHM_BYTES",
                   "bytes per link direction, cut into 8 slots (default 4M)"},
                  {"shm_direct", "RINGLET_SHM_DIRECT",
                   "1: messages of 64 KiB and more written straight into the receiver's memory "
                   "where it waits for them, or (16 KiB and more) read by the receiver from "
                   "the sender's; 0: always through the slots; auto (default): 1 between "
                   "threads and between processes where the kernel's copy is measured to "
                   "pay (blocks of at most 4 MiB where it does not past the cache); where "
                   "ranks outnumber cores and it does not, only the pairwise all-to-all's lent "
                   "blocks"}},
      .probe = [](const Settings& settings) -> std::string {
        try {
          const ShmOptions options = ShmOptions::fromSettings(settings);
          struct statvfs fs {};
          if (::statvfs(options.dir.c_str(), &fs) != 0 ||
              ::access(options.dir.c_str(), W_OK) != 0) {
            return fmt::format("{} is not a writable directory", options.dir);
          }
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      .checkSettings = [](const Settings& settings) { (void)ShmOptions::fromSettings(settings); },
      .canConnect =
          [](const PeerInfo& self, const PeerInfo& peer) {
            return !self.hostId.empty() && self.hostId == peer.hostId;
          },
      .make = [](TransportContext context) -> std::unique_ptr<Transport> {
        ShmOptions options = ShmOptions::fromSettings(context.settings);
        return makeShmTransport(std::move(context), std::move(options));
      },
      .describe = [](const Settings& settings) -> std::string {
        const ShmOptions options = ShmOptions::fromSettings(settings);
        struct statvfs fs {};
        std::string room = "free space unknown";
        if (::statvfs(options.dir.c_str(), &fs) == 0) {
          room = fmt::format("{:.1f} GiB free",
                             static_cast<double>(fs.f_bavail) * fs.f_frsize / (1ull << 30));
        }
        std::string direct = options.direct == ShmOptions::Direct::kOn ? "on" : "off";
        if (options.direct == ShmOptions::Direct::kAuto) {
          const bool pays = directBetween(options.direct, false, false);
          direct = fmt::format("between processes {} ({}; where ranks outnumber cores {})",
                               pays ? "on" : "off", describeKernelCopy(kernelCopy()),
                               pays ? "on" : "the all-to-all's lent blocks only");
        }
        const kernels::ApartCopy& apart = kernels::apartCopy();
        return fmt::format(
            "segments in {} ({}), {} slots x {} KiB per link direction, direct writes and "
            "lent messages {}; copies between a slot and a buffer that lie apart within 64 bytes "
            "by {} ({} KiB four times: memcpy {:.1f} us, the loop {:.1f} us)",
            options.dir, room, options.slotCount, options.slotBytes >> 10, direct,
            apart.loop ? "a loop of 16-byte loads and stores" : "memcpy",
            kernels::ApartCopy::kBytes >> 10, apart.memcpySeconds * 1e6, apart.loopSeconds * 1e6);
      },
  };
}

}  // namespace ringlet::transport::shm
