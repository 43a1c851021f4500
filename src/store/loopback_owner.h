#pragma once
// Who opened a loopback TCP connection: the uid that owns the client's socket, as the kernel's
// sock_diag netlink interface tells for that one socket (or, where it is missing, as
// /proc/net/tcp and /proc/net/tcp6 list it). A store without a job secret admits only
// connections of its own user this way, so its weak mode trusts "this user on this host", as a
// file store in a 0700 directory does.

#include <sys/types.h>

#include <optional>

namespace ringlet::store {

// The owner of the socket at the other end of `fd` (a connection accepted on this host), or
// nothing when the kernel does not list it (it closed already, another network namespace).
std::optional<uid_t> loopbackPeerUid(int fd);

}  // namespace ringlet::store
