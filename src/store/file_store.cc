// File store: one file per key in a shared directory.
//
//  - Names: "k-" + the key with every byte outside [A-Za-z0-9_.-] written as %XX; a key whose
//    name would pass kMaxNameBytes is named "h-" + SHA-256 of the key instead.
//  - set(): write a temporary file in the same directory, then rename() over the name (atomic:
//    a reader sees the old value or the new one, never half of one).
//  - get(): polls for the file with backoff (1 ms doubling to 20 ms) until the deadline.
//  - add(): read-modify-write under flock() on the directory's "lock" file; each call opens its
//    own descriptor, so threads of one process exclude each other as processes do.
//  - Files are made mode 0600 (a value may be the job secret in the weak mode), a directory the
//    store creates 0700. A key's file is opened without following symlinks and without blocking
//    (O_NONBLOCK: a FIFO put in its place is refused, not waited on), and must be a regular file
//    of at most kMaxValueBytes (a huge file is refused before anything is allocated).

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "ringlet/error.h"
#include "src/net/socket.h"
#include "src/store/store_common.h"

namespace ringlet {
namespace {

// 64 random bits for temporary file names (see FileStore's write).
uint64_t randomToken() {
  uint64_t token = 0;
  if (::getentropy(&token, sizeof token) != 0) {
    token = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return token;
}

constexpr size_t kMaxNameBytes = 200;

bool isSafe(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::string fileNameFor(std::string_view key) {
  std::string name = "k-";
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (isSafe(c)) {
      name += ch;
    } else {
      name += fmt::format("%{:02X}", c);
    }
    if (name.size() > kMaxNameBytes) break;
  }
  if (name.size() <= kMaxNameBytes) return name;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  name = "h-";
  for (unsigned char d : digest) name += fmt::format("{:02x}", d);
  return name;
}

// Owns an fd with an flock held for the object's lifetime.
class FileLock {
 public:
  FileLock(const std::string& path, std::string_view what)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) {
    if (!fd_.valid()) {
      throw IoError(
          fmt::format("{}: cannot open lock file {}: {}", what, path, net::errorText(errno)));
    }
    while (::flock(fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) {
        throw IoError(fmt::format("{}: flock({}) failed: {}", what, path, net::errorText(errno)));
      }
    }
  }
  ~FileLock() { ::flock(fd_.get(), LOCK_UN); }

 private:
  net::Fd fd_;
};

class FileStore final : public Store {
 public:
  FileStore(std::string directory, StoreOptions options)
      : directory_(std::move(directory)),
        options_(options),
        name_(fmt::format("file store {}", directory_)) {
    std::error_code ec;
    const std::filesystem::path dir(directory_);
    if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
    // The store's own directory, when it makes it, is for this user only.
    if (!ec && ::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
    }
    if (ec || !std::filesystem::is_directory(directory_)) {
      throw IoError(fmt::format("cannot create the directory of {}: {}", name_,
                                ec ? ec.message() : "not a directory"));
    }
  }

  void set(std::string_view key, std::span<const std::byte> value) override {
    store::checkKey(key, "set() on " + name_);
    store::checkValue(value.size(), "set() on " + name_);
    write(key, value);
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    store::checkKey(key, "get() on " + name_);
    const auto wait = store::effectiveTimeout(timeout, options_.timeout);
    const auto start = store::Clock::now();
    const auto deadline = start + wait;
    const std::string path = pathFor(key);
    auto backoff = std::chrono::milliseconds(1);
    while (true) {
      Bytes value;
      if (read(path, key, value)) return value;
      const auto now = store::Clock::now();
      if (now >= deadline) {
        store::throwGetTimeout(key, name_,
                               std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
      }
      std::this_thread::sleep_for(std::min<store::Clock::duration>(backoff, deadline - now));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(20));
    }
  }

  int64_t add(std::string_view key, int64_t delta) override {
    store::checkKey(key, "add() on " + name_);
    FileLock lock(directory_ + "/lock", "add() on " + name_);
    Bytes value;
    const int64_t current =
        read(pathFor(key), key, value) ? store::parseCounter(value, key, name_) : 0;
    const int64_t result = store::addCounter(current, delta, key, name_);
    write(key, store::counterBytes(result));
    return result;
  }

  bool check(std::string_view key) override {
    store::checkKey(key, "check() on " + name_);
    return ::access(pathFor(key).c_str(), F_OK) == 0;
  }

  std::string describe() const override { return name_; }

 private:
  std::string pathFor(std::string_view key) const { return directory_ + "/" + fileNameFor(key); }

  // False when the file does not exist (yet).
  bool read(const std::string& path, std::string_view key, Bytes& out) const {
    net::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) {
      if (errno == ENOENT) return false;
      throw IoError(fmt::format("reading key '{}' from {}: open {}: {}", store::printableKey(key),
                                name_, path, net::errorText(errno)));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      throw IoError(fmt::format("reading key '{}' from {}: fstat: {}", store::printableKey(key),
                                name_, net::errorText(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      throw IoError(fmt::format("reading key '{}' from {}: {} is not a regular file",
                                store::printableKey(key), name_, path));
    }
    if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > kMaxValueBytes) {
      throw IoError(
          fmt::format("reading key '{}' from {}: {} has {} bytes, more than a value may ({} bytes)",
                      store::printableKey(key), name_, path, st.st_size, kMaxValueBytes));
    }
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw IoError(fmt::format("reading key '{}' from {}: short read of {} ({} of {} bytes)",
                                  store::printableKey(key), name_, path, done, out.size()));
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }

  void write(std::string_view key, std::span<const std::byte> value) const {
    // A temporary file of this writer's own, renamed into place. Process ids alone do not make
    // its name unique (every rank in its own PID namespace is pid 1, and a forked child shares
    // the counter's value), so the name also carries a random number, and a name that exists
    // already is skipped (O_EXCL): never another writer's file, never unlinked by this one.
    static std::atomic<uint64_t> counter{0};
    std::string temp;
    auto fail = [&](std::string_view step, bool created) {
      const int err = errno;
      if (created) ::unlink(temp.c_str());
      throw IoError(fmt::format("writing key '{}' to {}: {} {}: {}", store::printableKey(key),
                                name_, step, temp, net::errorText(err)));
    };
    {
      net::Fd fd;
      for (int attempt = 0;; ++attempt) {
        temp = fmt::format("{}/tmp-{}-{:016x}-{}", directory_, ::getpid(), randomToken(),
                           counter.fetch_add(1));
        fd = net::Fd(
            ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (fd.valid()) break;
        if (errno != EEXIST || attempt >= 64) fail("open", false);
      }
      size_t done = 0;
      while (done < value.size()) {
        ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write", true);
        done += static_cast<size_t>(n);
      }
    }
    if (::rename(temp.c_str(), pathFor(key).c_str()) != 0) fail("rename", true);
  }

  const std::string directory_;
  const StoreOptions options_;
  const std::string name_;
};

}  // namespace

std::shared_ptr<Store> makeFileStore(const std::string& directory, StoreOptions options) {
  if (directory.empty()) throw InvalidArgument("makeFileStore: directory must not be empty");
  return std::make_shared<FileStore>(directory, options);
}

}  // namespace ringlet
