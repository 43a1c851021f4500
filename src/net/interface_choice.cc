#include "src/net/interface_choice.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include "ringlet/error.h"
#include "src/net/socket.h"

namespace ringlet::net {
namespace {

using InterfaceList = std::unique_ptr<ifaddrs, decltype(&freeifaddrs)>;

InterfaceList interfaces() {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) throw IoError(fmt::format("getifaddrs failed: {}", errorText(errno)));
  return InterfaceList(raw, &freeifaddrs);
}

std::string numeric(const sockaddr* address) {
  const int family = address->sa_family;
  if (family != AF_INET && family != AF_INET6) return "";
  char host[NI_MAXHOST] = {};
  const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (getnameinfo(address, length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return host;
}

}  // namespace

std::string interfaceHolding(const std::string& address) {
  InterfaceList list = interfaces();
  for (ifaddrs* a = list.get(); a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr != nullptr && numeric(a->ifa_addr) == address) return a->ifa_name;
  }
  return "";
}

InterfaceChoice chooseInterface(const std::string& socketAddr, const std::string& socketIfname,
                                const std::string& rendezvousHost) {
  if (!socketAddr.empty()) {
    return {socketAddr, interfaceHolding(socketAddr), "RINGLET_SOCKET_ADDR"};
  }
  if (!socketIfname.empty()) {
    return {interfaceAddress(socketIfname), socketIfname,
            fmt::format("RINGLET_SOCKET_IFNAME={}", socketIfname)};
  }
  if (rendezvousHost.empty()) {
    throw IoError(
        "no rendezvous address to route to and neither RINGLET_SOCKET_IFNAME nor "
        "RINGLET_SOCKET_ADDR is set");
  }
  const std::string routed = addressRoutingTo(rendezvousHost);
  if (!isLoopback(routed)) {
    return {routed, interfaceHolding(routed),
            fmt::format("it routes to the rendezvous address {}", rendezvousHost)};
  }
  // The store is on this host: peers elsewhere cannot reach loopback.
  InterfaceList list = interfaces();
  for (ifaddrs* a = list.get(); a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    const std::string address = numeric(a->ifa_addr);
    if (address.empty() || isLoopback(address)) continue;
    return {address, a->ifa_name,
            fmt::format("the rendezvous address {} is on this host (loopback); first non-loopback "
                        "interface that is up",
                        rendezvousHost)};
  }
  throw IoError(fmt::format(
      "the rendezvous address {} routes through loopback and no other interface is up: peers "
      "on other hosts could not reach this one (set RINGLET_SOCKET_IFNAME)",
      rendezvousHost));
}

}  // namespace ringlet::net
