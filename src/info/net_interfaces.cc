#include "src/info/net_interfaces.h"

#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "ringlet/error.h"
#include "src/net/socket.h"

namespace ringlet::info {

std::vector<NetInterface> netInterfaces() {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) {
    throw IoError(fmt::format("getifaddrs failed: {}", net::errorText(errno)));
  }
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, &freeifaddrs);
  std::vector<NetInterface> out;
  for (ifaddrs* a = raw; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name == nullptr) continue;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const NetInterface& i) { return i.name == a->ifa_name; });
    if (it == out.end()) {
      out.push_back({a->ifa_name, false, false, {}});
      it = out.end() - 1;
    }
    it->up = it->up || (a->ifa_flags & IFF_UP) != 0;
    it->loopback = it->loopback || (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (a->ifa_addr == nullptr) continue;
    int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char host[NI_MAXHOST];
    socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(a->ifa_addr, length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
      continue;
    }
    if (family == AF_INET) {
      // IPv4 before IPv6: the address a TCP listener would pick for this interface comes first.
      auto firstV6 = std::find_if(it->addresses.begin(), it->addresses.end(),
                                  [](const std::string& s) { return s.find(':') != s.npos; });
      it->addresses.insert(firstV6, host);
    } else {
      it->addresses.push_back(host);
    }
  }
  return out;
}

}  // namespace ringlet::info
