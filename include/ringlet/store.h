#pragma once
// Rendezvous stores: a small key/value service that ranks use to find each other.
//
// Contract shared by every implementation:
//  - Keys are non-empty strings of at most kMaxKeyBytes bytes; values are bytes, at most
//    kMaxValueBytes. Longer ones throw InvalidArgument naming the length and the limit.
//  - set() overwrites. get() blocks until the key exists or the timeout passes (TimeoutError that
//    names the key, the store and how long it waited). add() atomically adds to a 64-bit counter
//    stored under the key (a missing key counts as 0) and returns the new value; the counter is
//    stored as its decimal text, so get() on it returns e.g. "3".
//  - All methods are thread-safe. A store may be shared by several communicators; wrap it in a
//    prefix store to keep their keys apart.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringlet {

using Bytes = std::vector<std::byte>;

inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = 64u << 20;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(std::string_view key, std::span<const std::byte> value) = 0;
  // Blocks until `key` exists; timeout < 0 means the store's default timeout.
  virtual Bytes get(std::string_view key,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) = 0;
  virtual int64_t add(std::string_view key, int64_t delta) = 0;
  // True if the key exists now (never blocks).
  virtual bool check(std::string_view key) = 0;
  // A one-line description for error messages: "tcp store 127.0.0.1:29500", "file store /tmp/x".
  virtual std::string describe() const = 0;

  // Convenience wrappers for text values.
  void setString(std::string_view key, std::string_view value);
  std::string getString(std::string_view key,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
};

struct StoreOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // default for get()
};

// In-process store for ranks that are threads of one process.
std::shared_ptr<Store> makeInProcessStore(StoreOptions options = {});

// Store in a directory shared by the ranks (one host, or a shared file system). The directory is
// created (mode 0700) if missing. Values are written atomically (write then rename), each file
// mode 0600. A key's file that is not a regular file (a FIFO, a symlink) or is larger than
// kMaxValueBytes makes get() throw IoError instead of blocking or allocating it.
std::shared_ptr<Store> makeFileStore(const std::string& directory, StoreOptions options = {});

// Namespaces every key of `base` under "prefix/".
std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> base);

// Limits one TCP store server enforces. A request past one is refused with an error that names
// the limit (the client throws IoError, "... quota ..."); the server goes on serving the others.
struct TcpStoreQuotas {
  size_t maxKeys = size_t{1} << 20;     // keys held at once
  size_t maxBytes = size_t{1} << 30;    // bytes of keys and values held at once
  size_t maxConnectionsPerHost = 1024;  // open connections from one client address
};

// TCP store server. Listens on host:port (port 0 picks a free port; port() tells which) and
// serves until destroyed. A client that sends a malformed request is disconnected; others go on.
//
// Authentication: every connection starts with a challenge-response (fresh nonces from both
// sides, HMAC-SHA256 keyed with `secret`); a client that cannot prove it holds the secret is
// refused before any request is read, and the server proves the same to the client. The secret
// itself never crosses the wire. With an empty secret nothing is proven: start() then accepts
// only a loopback host (127.0.0.0/8, ::1), and admits only connections whose socket belongs to
// the server's own user (the kernel's sock_diag), so every process of this user on this host
// is trusted (docs/security.md).
//
// Sealed (`sealed`, ringlet's bootstrap and launcher set it from RINGLET_SOCKET_ENCRYPT=1): after
// the challenge-response every byte of a connection travels in AES-256-GCM records under keys
// derived from the secret and both nonces, so nobody on the path reads or changes a key, a value
// or a counter unnoticed. A sealing server refuses, by name, a client that does not seal; a
// server that does not seal serves a client that does, sealed. Needs a secret.
//
// When accept() fails for lack of descriptors (EMFILE, ENFILE) the server stops accepting for a
// short, growing pause and keeps serving its connected clients.
class TcpStoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 0;
    std::string secret{};  // raw bytes; empty: unauthenticated, loopback only
    TcpStoreQuotas quotas{};
    bool sealed = false;  // every connection sealed (needs a secret); clear clients refused
  };
  static std::unique_ptr<TcpStoreServer> start(Options options);
  virtual ~TcpStoreServer() = default;
  virtual uint16_t port() const = 0;
  virtual std::string host() const = 0;
};

// Connects to a TCP store server, retrying until `connectTimeout` passes (the server may start
// after its clients). Throws TimeoutError naming host:port if it never answers, IoError naming
// the store when either side fails the secret check (a different secret, or a server that is
// not the job's) or the server refuses the connection (a quota).
struct TcpStoreClientOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // default for get()
  std::chrono::milliseconds connectTimeout = std::chrono::seconds(60);
  std::string secret{};  // raw bytes; must equal the server's
  bool sealed = false;   // seal the connections (needs a secret); any server then seals them
};
std::shared_ptr<Store> connectTcpStore(const std::string& host, uint16_t port,
                                       TcpStoreClientOptions options = {});

}  // namespace ringlet
