// Just enough ACPI Machine Language (ACPI 6.5 chapter 20, "AML Specification") to describe the
// devices a guest can find only through the DSDT: a scope, a device with its _HID, a _CRS of
// fixed I/O ports, and the sleep states' packages. Each function returns the encoded bytes; they nest by value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace minivmm::vmm::aml {

using Bytes = std::vector<std::uint8_t>;

// PkgLength (20.2.4) of a package whose body is `body_size` bytes; the encoding counts its own
// bytes.
Bytes pkg_length(std::size_t body_size);
// A four-character NameSeg, e.g. "_HID".
Bytes name_seg(std::string_view seg);
// Scope(\_SB) { body }: `path` is a root NameString such as "\\_SB_".
Bytes scope(std::string_view path, const Bytes& body);
// Device(NAME) { body }.
Bytes device(std::string_view name, const Bytes& body);
// Name(NAME, "string").
Bytes name_string(std::string_view name, std::string_view value);
// Name(NAME, Package() { v0, v1, ... }) of byte integers: the sleep states' _S3 and _S5.
Bytes name_byte_package(std::string_view name, std::initializer_list<std::uint8_t> values);
// Name(_CRS, ResourceTemplate() { IO(Decode16, base, base, 1, count) }).
Bytes crs_io_ports(std::uint16_t base, std::uint8_t count);
// Name(_UID, n) with a byte integer.
Bytes name_uid(std::uint8_t uid);
// Name(_CRS, ResourceTemplate() { Memory32Fixed(ReadWrite, base, size)
// Interrupt(ResourceConsumer, Edge, ActiveHigh, Exclusive) { gsi } }): a virtio-mmio window.
Bytes crs_mmio_irq(std::uint32_t base, std::uint32_t size, std::uint32_t gsi);

}  // namespace minivmm::vmm::aml
