#pragma once
// A Store that is a client of PyTorch's c10d TCPStore, so that ringlet programs started by
// torchrun meet through the store torchrun's agent already hosts on MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True) instead of hosting one of their own.
//
// Wire protocol: PyTorch 1.13's TCPStore (the one Debian 12 ships) or 2.x's (which validates
// each connection first and renumbers the requests), found on the first connection.
//
// Every key is sent as "/" + keyPrefix + key, the way a torch client sends "prefix/key" under
// "/", so ringlet's keys stay apart from torch's own and a torch client reads them as
// `store.get(keyPrefix + key)`.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ringlet/store.h"

namespace ringlet {

// The TCPStore wire protocols.
enum class C10dProtocol { kUnknown, kTorch1, kTorch2 };

struct C10dStoreOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);  // default for get()
  std::chrono::milliseconds connectTimeout = std::chrono::seconds(60);
  // Namespace of every key; torchrun's restart count belongs in it (keys of an earlier attempt
  // stay in the agent's store).
  std::string keyPrefix = "ringlet/";
  // Speak 1.13's protocol without asking the server first (tests of hostile servers that answer
  // one request). Nothing pins 2.x: its first message, read by a 1.13 server, can be a SET of
  // gigabytes, which that server allocates.
  bool assumeTorch1 = false;
};

// Connects to the c10d TCPStore at host:port, retrying until `connectTimeout` passes, and finds
// its protocol (unless given). Throws TimeoutError naming host:port if it never answers, IoError
// if it answers as no TCPStore does. Thread-safe; a thread parked in get() never
// holds up another thread's requests (each request in flight has its own connection).
std::shared_ptr<Store> connectC10dStore(const std::string& host, uint16_t port,
                                        C10dStoreOptions options = {});

// The protocol a store made by connectC10dStore speaks (kTorch1 or kTorch2); kUnknown for any
// other store.
C10dProtocol c10dProtocolOf(const Store& store);

}  // namespace ringlet
