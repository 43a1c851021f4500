#pragma once
// ringlet's rendezvous over the store PyTorch hands a process-group backend: a TCPStore (env://,
// torchrun), a FileStore (file://), a HashStore, or a PrefixStore around any of them. Through it
// ringlet's bootstrap needs no port of its own, and every process group (init_process_group,
// new_group) keeps to the key space torch gives it.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "ringlet/store.h"

namespace ringlet::torch_backend {

// `describe` names the store in error messages. When it has the form "tcp store HOST:PORT",
// ringlet's TCP transport listens on the interface that routes to HOST (as for its own stores).
// Waits poll check() with back-off rather than block in the c10d store, so a thread waiting for
// a key never holds a store that another thread needs (c10d stores serialise their calls).
std::shared_ptr<Store> adaptC10dStore(c10::intrusive_ptr<c10d::Store> store,
                                      std::chrono::milliseconds timeout, std::string describe);

}  // namespace ringlet::torch_backend
