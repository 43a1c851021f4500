#include "src/store/loopback_owner.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
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

// Copies the address and port of `address` into a sock_diag socket id's fields.
void putAddress(const sockaddr_storage& address, __be16& port, __be32 (&words)[4]) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    port = in.sin_port;
    words[0] = in.sin_addr.s_addr;
    return;
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
  port = in6.sin6_port;
  std::memcpy(words, in6.sin6_addr.s6_addr, sizeof(words));
}

// The kernel's sock_diag answer for the one TCP socket whose local end is `client` and remote
// end `server`: its owner, nothing when there is no such socket, or the error when sock_diag
// cannot be asked (kernel without it). One exact lookup, whatever the number of sockets.
struct DiagAnswer {
  std::optional<uid_t> uid;
  bool asked = false;
};

DiagAnswer askSockDiag(const sockaddr_storage& client, const sockaddr_storage& server) {
  const int nl = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return {};
  // The kernel answers at once; a bound on the wait all the same (then: the /proc fallback).
  const timeval bound{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  struct Request {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof(request);
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;  // one socket, not a dump
  request.body.sdiag_family = static_cast<__u8>(client.ss_family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0u;
  putAddress(client, request.body.id.idiag_sport, request.body.id.idiag_src);
  putAddress(server, request.body.id.idiag_dport, request.body.id.idiag_dst);
  request.body.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  request.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  DiagAnswer answer;
  if (::sendto(nl, &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof(kernel)) == static_cast<ssize_t>(sizeof(request))) {
    alignas(nlmsghdr) char reply[8192];
    const ssize_t n = ::recv(nl, reply, sizeof(reply), 0);
    const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
    if (n >= static_cast<ssize_t>(sizeof(nlmsghdr)) && NLMSG_OK(header, static_cast<size_t>(n))) {
      if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
          header->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
        answer = {found->idiag_uid, true};
      } else if (header->nlmsg_type == NLMSG_ERROR &&
                 header->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
        const auto* error = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
        // No such socket: it closed already. Anything else: sock_diag cannot answer here.
        answer.asked = error->error == -ENOENT;
      }
    }
  }
  ::close(nl);
  return answer;
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
  if (const DiagAnswer diag = askSockDiag(remote, local); diag.asked) return diag.uid;
  // Without sock_diag: the kernel's table, read through (slow with many sockets on the host).
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
