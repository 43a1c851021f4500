#pragma once
// Which address the TCP transport listens on when its peers are on other hosts, and why; shared by
// the transport and ringlet-info so that what ringlet-info says is what a job does.

#include <string>

namespace ringlet::net {

struct InterfaceChoice {
  std::string address;    // numeric address to listen on
  std::string interface;  // the interface that holds it ("" when none does, e.g. 0.0.0.0)
  std::string reason;     // one phrase: why this one
};

// In order: `socketAddr` (RINGLET_SOCKET_ADDR) as given; the address of `socketIfname`
// (RINGLET_SOCKET_IFNAME); the address of the interface the kernel routes `rendezvousHost` (the
// store's host) through. A loopback address is never the answer for peers on other hosts: when
// the route to the rendezvous host is loopback (the store runs on this host), the first up,
// non-loopback interface with an IPv4 address is used instead. Throws InvalidArgument (no such
// interface) or IoError (no route, no usable interface) naming what it looked for.
InterfaceChoice chooseInterface(const std::string& socketAddr, const std::string& socketIfname,
                                const std::string& rendezvousHost);

// The name of the interface that holds `address`, or "" if none does.
std::string interfaceHolding(const std::string& address);

}  // namespace ringlet::net
