#include "vmm/machine/net_spec.h"

#include <cstdlib>

namespace minivmm::vmm {
namespace {

constexpr const char* kForms =
    "tap=IFNAME[,mac=M], tap-fd=N[,mac=M] or user[,hostfwd=udp|tcp:[ADDR]:PORT-[ADDR]:PORT][,mac=M]";

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The first word: which back-end. Returns false with `error` set.
bool parse_kind(const std::string& word, NetSpec& n, std::string& error) {
  if (word == "user") {
    n.kind = NetSpec::Kind::kUser;
  } else if (word.rfind("tap=", 0) == 0) {
    n.kind = NetSpec::Kind::kTap;
    n.ifname = word.substr(4);
    // IFNAMSIZ is 16 with the NUL; a '/' or a blank would not name an interface.
    if (n.ifname.empty() || n.ifname.size() > 15 ||
        n.ifname.find_first_of("/ \t") != std::string::npos) {
      error = "'" + n.text + "': the interface name must be 1 to 15 characters, no '/' or blank";
      return false;
    }
  } else if (word.rfind("tap-fd=", 0) == 0) {
    n.kind = NetSpec::Kind::kTapFd;
    const std::string v = word.substr(7);
    char* end = nullptr;
    const long fd = v.empty() ? -1 : std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || fd < 0 || fd > 65535) {
      error = "'" + n.text + "': tap-fd= takes a descriptor number";
      return false;
    }
    n.fd = static_cast<int>(fd);
  } else {
    error = "'" + n.text + "': unknown network back-end (" + kForms + ")";
    return false;
  }
  return true;
}

}  // namespace

std::optional<devices::MacAddress> parse_mac(const std::string& text) {
  if (text.size() != 17) return std::nullopt;
  devices::MacAddress mac{};
  for (std::size_t i = 0; i < mac.size(); ++i) {
    const int hi = hex_digit(text[i * 3]);
    const int lo = hex_digit(text[i * 3 + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[i * 3 + 2] != ':')) return std::nullopt;
    mac[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return mac;
}

std::optional<NetSpec> parse_net_spec(const std::string& spec, std::string& error) {
  NetSpec n;
  n.text = spec;
  const std::vector<std::string> words = split_commas(spec);
  if (!parse_kind(words[0], n, error)) return std::nullopt;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.rfind("mac=", 0) == 0) {
      n.mac = parse_mac(w.substr(4));
      if (!n.mac) {
        error = "'" + spec + "': '" + w + "' is not a MAC address (mac=52:54:00:12:34:56)";
        return std::nullopt;
      }
      if ((*n.mac)[0] & 1) {
        error = "'" + spec + "': '" + w + "' is a multicast address; a NIC needs a unicast one";
        return std::nullopt;
      }
    } else if (w.rfind("hostfwd=", 0) == 0 && n.kind == NetSpec::Kind::kUser) {
      try {
        n.forwards.push_back(devices::parse_host_forward(w.substr(8)));
      } catch (const std::exception& e) {
        error = "'" + spec + "': " + e.what();
        return std::nullopt;
      }
    } else {
      error = "'" + spec + "': unknown option '" + w + "' (" + kForms + ")";
      return std::nullopt;
    }
  }
  return n;
}

}  // namespace minivmm::vmm
