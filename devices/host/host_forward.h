// A user-mode network host forward in QEMU's spelling, the value of `hostfwd=`:
//
//   [tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT      e.g. udp::5555-:7
//
// An empty protocol is tcp, an empty host address every interface (as in QEMU), an empty guest
// address the guest's DHCP address. Addresses are IPv4 dotted quads, ports 1..65535 (port 0 would
// forward an unknowable port). Parsing is strict: anything else is refused with one line that
// quotes the forward and says what is wrong with it.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace minivmm::devices {

struct HostForward {
  bool udp = false;
  in_addr host_addr{};   // network byte order; INADDR_ANY: every interface
  std::uint16_t host_port = 0;
  in_addr guest_addr{};  // network byte order; 0: the guest's DHCP address
  std::uint16_t guest_port = 0;
  std::string spec;      // "hostfwd=" and the text as given, for messages
};

// Throws NetBackendError ("hostfwd=udp::5555-:7x: bad guest port '7x' (1-65535)").
HostForward parse_host_forward(std::string_view value);

}  // namespace minivmm::devices
