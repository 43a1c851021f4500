#include "src/store/loopback_owner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ringlet::store {
namespace {

// An address as /proc/net/tcp{,6} prints it: the address words in host byte order as %08X each,
// a colon, the port as %04X.
std::string procAddress(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    return fmt::format("{:08X}:{:04X}", in.sin_addr.s_addr, ntohs(in.sin_port));
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
  uint32_t words[4];
  std::memcpy(words, in6.sin6_addr.s6_addr, sizeof(words));
  return fmt::format("{:08X}{:08X}{:08X}{:08X}:{:04X}", words[0], words[1], words[2], words[3],
                     ntohs(in6.sin6_port));
}

}  // namespace

std::optional<uid_t> loopbackPeerUid(int fd) {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  socklen_t localBytes = sizeof(local);
  socklen_t remoteBytes = sizeof(remote);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localBytes) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remoteBytes) != 0 ||
      local.ss_family != remote.ss_family ||
      (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
    return std::nullopt;
  }
  // The client's socket: its local address is our remote one, and the other way round.
  const std::string clientSide = procAddress(remote);
  const std::string serverSide = procAddress(local);
  std::ifstream table(local.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, localAddress, remoteAddress, state, queues, timer, retransmits;
    uid_t uid = 0;
    if (!(fields >> slot >> localAddress >> remoteAddress >> state >> queues >> timer >>
          retransmits >> uid)) {
      continue;
    }
    if (localAddress == clientSide && remoteAddress == serverSide) return uid;
  }
  return std::nullopt;
}

}  // namespace ringlet::store
