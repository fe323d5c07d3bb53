#include "vmm/boot/aml.h"

#include "vmm/boot/boot_error.h"

namespace minivmm::vmm::aml {
namespace {

constexpr std::uint8_t kNameOp = 0x08;
constexpr std::uint8_t kBytePrefix = 0x0a;
constexpr std::uint8_t kStringPrefix = 0x0d;
constexpr std::uint8_t kScopeOp = 0x10;
constexpr std::uint8_t kBufferOp = 0x11;
constexpr std::uint8_t kPackageOp = 0x12;
constexpr std::uint8_t kZeroOp = 0x00;
constexpr std::uint8_t kOneOp = 0x01;
constexpr std::uint8_t kExtOpPrefix = 0x5b;
constexpr std::uint8_t kDeviceOp = 0x82;  // after kExtOpPrefix
// Resource descriptors (ACPI 6.5 6.4): small I/O port descriptor, 16-bit decode; end tag.
constexpr std::uint8_t kIoPortDescriptor = 0x47;
constexpr std::uint8_t kIoDecode16 = 0x01;
constexpr std::uint8_t kEndTag = 0x79;
// Large descriptors (ACPI 6.5 6.4.3): 32-bit fixed memory range, extended interrupt.
constexpr std::uint8_t kMemory32Fixed = 0x86;
constexpr std::uint8_t kExtendedInterrupt = 0x89;

void add(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

Bytes package(std::initializer_list<std::uint8_t> op, const Bytes& body) {
  Bytes out(op);
  add(out, pkg_length(body.size()));
  add(out, body);
  return out;
}

}  // namespace

Bytes pkg_length(std::size_t body_size) {
  // One byte holds up to 63 (6 bits); with n follow bytes, 4 + 8n bits. The length includes
  // the PkgLength's own bytes.
  for (std::size_t extra = 0; extra <= 3; ++extra) {
    const std::size_t total = body_size + 1 + extra;
    const std::size_t limit = extra == 0 ? 0x40 : (std::size_t{1} << (4 + 8 * extra));
    if (total >= limit) continue;
    if (extra == 0) return {static_cast<std::uint8_t>(total)};
    Bytes out{static_cast<std::uint8_t>((extra << 6) | (total & 0x0f))};
    for (std::size_t i = 0; i < extra; ++i) {
      out.push_back(static_cast<std::uint8_t>(total >> (4 + 8 * i)));
    }
    return out;
  }
  throw BootError("AML package of " + std::to_string(body_size) + " bytes is too large");
}

Bytes name_seg(std::string_view seg) {
  if (seg.size() != 4) throw BootError("AML NameSeg '" + std::string(seg) + "' is not 4 chars");
  return Bytes(seg.begin(), seg.end());
}

Bytes scope(std::string_view path, const Bytes& body) {
  Bytes inner(path.begin(), path.end());
  add(inner, body);
  return package({kScopeOp}, inner);
}

Bytes device(std::string_view name, const Bytes& body) {
  Bytes inner = name_seg(name);
  add(inner, body);
  return package({kExtOpPrefix, kDeviceOp}, inner);
}

Bytes name_string(std::string_view name, std::string_view value) {
  Bytes out{kNameOp};
  add(out, name_seg(name));
  out.push_back(kStringPrefix);
  out.insert(out.end(), value.begin(), value.end());
  out.push_back(0);
  return out;
}

Bytes name_byte_package(std::string_view name, std::initializer_list<std::uint8_t> values) {
  if (values.size() > 255) throw BootError("AML package of more than 255 elements");
  Bytes body{static_cast<std::uint8_t>(values.size())};  // NumElements
  for (const std::uint8_t v : values) {
    // ZeroOp and OneOp, as QEMU's aml_int() writes them; BytePrefix otherwise.
    if (v == 0) {
      body.push_back(kZeroOp);
    } else if (v == 1) {
      body.push_back(kOneOp);
    } else {
      body.push_back(kBytePrefix);
      body.push_back(v);
    }
  }
  Bytes out{kNameOp};
  add(out, name_seg(name));
  add(out, package({kPackageOp}, body));
  return out;
}

Bytes crs_io_ports(std::uint16_t base, std::uint8_t count) {
  const auto lo = static_cast<std::uint8_t>(base & 0xff);
  const auto hi = static_cast<std::uint8_t>(base >> 8);
  // Minimum and maximum base are equal (a fixed place), alignment 1; then the end tag with a
  // zero checksum ("treated as correct").
  const Bytes resources{kIoPortDescriptor, kIoDecode16, lo, hi, lo, hi, 0x01, count, kEndTag, 0x00};
  Bytes buffer_body{kBytePrefix, static_cast<std::uint8_t>(resources.size())};
  add(buffer_body, resources);
  Bytes out{kNameOp};
  add(out, name_seg("_CRS"));
  add(out, package({kBufferOp}, buffer_body));
  return out;
}

Bytes name_uid(std::uint8_t uid) {
  Bytes out{kNameOp};
  add(out, name_seg("_UID"));
  if (uid <= 1) {
    out.push_back(uid == 0 ? kZeroOp : kOneOp);
  } else {
    out.push_back(kBytePrefix);
    out.push_back(uid);
  }
  return out;
}

Bytes crs_mmio_irq(std::uint32_t base, std::uint32_t size, std::uint32_t gsi) {
  Bytes resources;
  const auto le32 = [&resources](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) resources.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  // Memory32Fixed: length 9, read-write.
  resources.insert(resources.end(), {kMemory32Fixed, 0x09, 0x00, 0x01});
  le32(base);
  le32(size);
  // Extended interrupt: length 6; flags consumer | edge (active high, exclusive), as the ISA
  // IRQ an ISA-numbered GSI gets from `virtio_mmio.device=` on the command line; one entry.
  resources.insert(resources.end(), {kExtendedInterrupt, 0x06, 0x00, 0x03, 0x01});
  le32(gsi);
  resources.insert(resources.end(), {kEndTag, 0x00});
  Bytes buffer_body{kBytePrefix, static_cast<std::uint8_t>(resources.size())};
  add(buffer_body, resources);
  Bytes out{kNameOp};
  add(out, name_seg("_CRS"));
  add(out, package({kBufferOp}, buffer_body));
  return out;
}

}  // namespace minivmm::vmm::aml
