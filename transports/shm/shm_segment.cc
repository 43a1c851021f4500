#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <utility>

#include "ringlet/error.h"
#include "src/net/socket.h"
#include "transports/shm/shm_wait.h"

namespace ringlet::transport::shm {
namespace {

constexpr size_t kPage = 4096;

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

size_t controlBytes() {
  return roundUp(sizeof(SegmentHeader) + 2 * sizeof(Endpoint) + 2 * sizeof(Fifo), kPage);
}

std::string errnoText(int err) { return std::strerror(err); }

// Bytes an unprivileged writer may still allocate in `dir`, or nullopt-like 0 on failure.
bool freeBytes(const std::string& dir, uint64_t* free) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return false;
  *free = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return true;
}

std::string noRoomText(const std::string& dir, size_t wanted) {
  uint64_t free = 0;
  std::string freeText = freeBytes(dir, &free) ? fmt::format("{} bytes", free) : "unknown space";
  return fmt::format("{} has {} free but a shared-memory segment needs {} bytes", dir, freeText,
                     wanted);
}

}  // namespace

size_t SegmentGeometry::slotsOffset() const { return controlBytes(); }

size_t SegmentGeometry::totalBytes() const { return slotsOffset() + 2 * slotCount * slotBytes; }

std::string segmentName(const std::string& jobId, int lowRank, int highRank) {
  std::string job;
  for (char c : jobId) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '.';
    job += keep ? c : '_';
    if (job.size() >= 64) break;
  }
  if (job.empty()) job = "job";
  std::random_device random;
  uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random();
  return fmt::format("{}{}-{}-{}-{:016x}", kSegmentPrefix, job, lowRank, highRank, nonce);
}

Segment Segment::create(const std::string& dir, const std::string& name, SegmentGeometry geometry,
                        int creatorRank, int openerRank, std::string* noRoom) {
  const size_t total = geometry.totalBytes();
  uint64_t free = 0;
  if (freeBytes(dir, &free) && free < total) {
    *noRoom = noRoomText(dir, total);
    return Segment();
  }
  const std::string path = dir + "/" + name;
  checkSegmentName(name);
  // O_EXCL: never take over a file someone put there first; O_NOFOLLOW: nor a symlink.
  net::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    throw IoError(fmt::format("shm: cannot create segment {}: {}", path, errnoText(errno)));
  }
  Segment segment;
  segment.path_ = path;  // from here on the destructor unlinks it
  // Exactly 0600 whatever the umask: the opener checks it.
  if (::fchmod(fd.get(), 0600) != 0) {
    throw IoError(fmt::format("shm: cannot chmod segment {}: {}", path, errnoText(errno)));
  }
  segment.geometry_ = geometry;
  if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) {
    int err = errno;
    if (err == ENOSPC || err == EFBIG) {
      *noRoom = noRoomText(dir, total);
      return Segment();
    }
    throw IoError(
        fmt::format("shm: cannot size segment {} to {} bytes: {}", path, total, errnoText(err)));
  }
  // Reserve every page now: a tmpfs that fills up later would kill us with SIGBUS on first touch.
  if (::fallocate(fd.get(), 0, 0, static_cast<off_t>(total)) != 0) {
    int err = errno;
    if (err == ENOSPC) {
      *noRoom = noRoomText(dir, total);
      return Segment();
    }
    if (err != EOPNOTSUPP) {
      throw IoError(fmt::format("shm: cannot reserve {} bytes for segment {}: {}", total, path,
                                errnoText(err)));
    }
  }
  void* base =
      ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) {
    throw IoError(
        fmt::format("shm: cannot map segment {} ({} bytes): {}", path, total, errnoText(errno)));
  }
  segment.base_ = static_cast<std::byte*>(base);
  segment.bytes_ = total;
  segment.fd_ = std::move(fd);

  // The file is fresh (zero-filled); construct the atomics in place, header last.
  for (int side = 0; side < 2; ++side) {
    Endpoint* e = new (segment.endpoint(side)) Endpoint{};
    e->state.store(static_cast<uint32_t>(EndpointState::kOpen), std::memory_order_relaxed);
    e->abortOrigin = -1;
  }
  for (int index = 0; index < 2; ++index) new (segment.fifo(index)) Fifo{};
  SegmentHeader* h = new (segment.base_) SegmentHeader{};
  h->version = kSegmentVersion;
  h->slotCount = static_cast<uint32_t>(geometry.slotCount);
  h->slotBytes = geometry.slotBytes;
  h->totalBytes = total;
  h->ranks[0] = creatorRank;
  h->ranks[1] = openerRank;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  return segment;
}

Segment Segment::open(const std::string& dir, const std::string& name, int creatorRank,
                      int openerRank) {
  checkSegmentName(name);
  const std::string path = dir + "/" + name;
  // O_NOFOLLOW: a symlink is refused; O_NONBLOCK: a FIFO put in its place does not block.
  net::Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    throw IoError(fmt::format("shm: cannot open segment {} created by rank {}: {}", path,
                              creatorRank, errnoText(errno)));
  }
  // What was opened, not what the name pointed at a moment before: a regular file of this user,
  // mode 0600 (as create() makes it), of a size the header then has to match.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw IoError(fmt::format("shm: cannot stat segment {}: {}", path, errnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw IoError(
        fmt::format("shm: segment {} of rank {} is not a regular file", path, creatorRank));
  }
  if (st.st_uid != ::geteuid()) {
    throw IoError(fmt::format(
        "shm: segment {} belongs to uid {}, not to this user (uid {}): not made by rank {}", path,
        st.st_uid, ::geteuid(), creatorRank));
  }
  if ((st.st_mode & 07777) != 0600) {
    throw IoError(fmt::format(
        "shm: segment {} has mode {:04o}, not 0600: not made by rank {}, or changed since", path,
        st.st_mode & 07777, creatorRank));
  }
  const size_t fileBytes = static_cast<size_t>(st.st_size);
  if (fileBytes < controlBytes() || fileBytes > kMaxSegmentBytes) {
    throw IoError(fmt::format("shm: segment {} has {} bytes, outside {}..{}", path, fileBytes,
                              controlBytes(), kMaxSegmentBytes));
  }
  void* base =
      ::mmap(nullptr, fileBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) {
    throw IoError(fmt::format("shm: cannot map segment {} ({} bytes): {}", path, fileBytes,
                              errnoText(errno)));
  }
  Segment segment;
  segment.base_ = static_cast<std::byte*>(base);
  segment.bytes_ = fileBytes;
  segment.fd_ = std::move(fd);
  // The name came from the store: the opener never unlinks it. The creator unlinks its own file
  // once this side has acknowledged the mapping.
  const SegmentHeader* h = segment.header();
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion) {
    throw IoError(fmt::format("shm: segment {} is not a ringlet segment of version {}", path,
                              kSegmentVersion));
  }
  segment.geometry_ = {.slotCount = h->slotCount, .slotBytes = h->slotBytes};
  if (h->ranks[0] != creatorRank || h->ranks[1] != openerRank || h->slotCount == 0 ||
      h->slotCount > kMaxSlots || h->totalBytes != fileBytes ||
      segment.geometry_.totalBytes() != fileBytes) {
    throw IoError(fmt::format(
        "shm: segment {} does not match: ranks {}/{} (expected {}/{}), {} slots of {} bytes, "
        "header says {} bytes, file has {}",
        path, h->ranks[0], h->ranks[1], creatorRank, openerRank, h->slotCount, h->slotBytes,
        h->totalBytes, fileBytes));
  }
  return segment;
}

void Segment::offerMembarrierFences(int side) {
  endpoint(side)->membarrierFences = joinMembarrierFences() ? 1 : 0;
}

void Segment::unlinkFile() {
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

bool Segment::holdLivenessLock(int side) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = side;
  lock.l_len = 1;
  return fd_.valid() && ::fcntl(fd_.get(), F_OFD_SETLK, &lock) == 0;
}

bool livenessLockHeld(int fd, int side) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = side;
  lock.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;
  return lock.l_type != F_UNLCK;
}

void checkSegmentName(std::string_view name) {
  const bool ok = name.size() > kSegmentPrefix.size() && name.size() <= 255 &&
                  name.substr(0, kSegmentPrefix.size()) == kSegmentPrefix &&
                  name.find_first_not_of(
                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789_.-") == std::string_view::npos;
  if (!ok) {
    std::string shown;
    for (char c : name.substr(0, 80)) {
      shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    throw IoError(fmt::format(
        "shm: '{}' is not a ringlet segment name ('{}' then [A-Za-z0-9_.-], no slashes); refused "
        "before any open or unlink",
        shown, kSegmentPrefix));
  }
}

Segment::Segment(Segment&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      geometry_(other.geometry_),
      path_(std::exchange(other.path_, {})),
      fd_(std::move(other.fd_)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    geometry_ = other.geometry_;
    path_ = std::exchange(other.path_, {});
    fd_ = std::move(other.fd_);
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::reset() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  if (!path_.empty()) ::unlink(path_.c_str());
  base_ = nullptr;
  bytes_ = 0;
  path_.clear();
  fd_.reset();
}

Endpoint* Segment::endpoint(int side) const {
  return reinterpret_cast<Endpoint*>(base_ + roundUp(sizeof(SegmentHeader), kCacheLine) +
                                     side * sizeof(Endpoint));
}

Fifo* Segment::fifo(int index) const {
  return reinterpret_cast<Fifo*>(base_ + roundUp(sizeof(SegmentHeader), kCacheLine) +
                                 2 * sizeof(Endpoint) + index * sizeof(Fifo));
}

std::byte* Segment::slots(int fifoIndex) const {
  return base_ + geometry_.slotsOffset() + fifoIndex * geometry_.slotCount * geometry_.slotBytes;
}

}  // namespace ringlet::transport::shm
