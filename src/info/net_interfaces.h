#pragma once
// The host's network interfaces and their addresses (getifaddrs).

#include <string>
#include <vector>

namespace ringlet::info {

struct NetInterface {
  std::string name;
  bool up = false;
  bool loopback = false;
  std::vector<std::string> addresses;  // numeric IPv4 and IPv6 addresses, IPv4 first
};

// In the order the kernel lists them. Throws IoError when getifaddrs fails.
std::vector<NetInterface> netInterfaces();

}  // namespace ringlet::info
