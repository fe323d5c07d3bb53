// The host side of a network device: where the guest's Ethernet frames go and where frames for
// the guest come from (a TAP interface, or libslirp's user-mode network). The device
// (VirtioNet) and a back-end talk through two small interfaces, so either side can be replaced by
// a fake in tests:
//  - NetBackend, which the device calls: transmit a frame, "the guest posted receive buffers";
//  - NetPeer, which the back-end calls: a frame for the guest, "you may transmit again".
//
// A frame is a whole Ethernet frame (destination MAC first, no FCS) without any virtio header:
// the header is the device's business, the TAP's own vnet header the TAP back-end's.
//
// Back-pressure, both ways, with nothing dropped silently:
//  - transmit() may answer kWouldBlock (a full host queue). The frame was not taken and nothing
//    was dropped: the device keeps it, stops transmitting, and tries again when the back-end
//    calls tx_ready(). A frame the back-end cannot ever send (interface down, a host error) is
//    kDropped and counted by the back-end.
//  - offer_frame() may answer false (the guest has no receive buffer). The back-end then keeps
//    the frame, or drops it and counts it, as its own policy says, and offers nothing more until
//    rx_space().
//
// Threads: every call, both ways, on the loop thread. The peer's methods may be called from
// inside transmit() and rx_space() (libslirp answers an ARP request from inside its input
// function); the back-end never calls tx_ready() from inside transmit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>

#include "devices/bus/report_writer.h"

namespace minivmm::devices {

// The largest frame either side handles: the largest MTU Linux gives an interface (ETH_MAX_MTU,
// 65535) plus the Ethernet header and one VLAN tag. A virtio-net guest without VIRTIO_NET_F_MTU
// may raise its MTU that far, and a TAP's MTU can be set as high.
inline constexpr std::size_t kMaxFrameBytes = 65535 + 14 + 4;
// An Ethernet header: the least a frame can be.
inline constexpr std::size_t kMinFrameBytes = 14;

// A back-end that cannot be set up (a missing interface, a port in use, no libslirp), with a
// one-line message for the user.
class NetBackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NetPeer {
 public:
  virtual ~NetPeer() = default;
  // A frame for the guest. True: taken (written into a receive buffer, or dropped and counted
  // by the device). False: no receive buffer now; the back-end keeps the frame or drops it, and
  // offers nothing until rx_space().
  virtual bool offer_frame(std::span<const std::uint8_t> frame) noexcept = 0;
  // The back-end can take frames again, after transmit() said kWouldBlock.
  virtual void tx_ready() noexcept = 0;
};

enum class NetTxResult {
  kSent,        // handed to the host
  kDropped,     // will never be sent (counted by the back-end); the device moves on
  kWouldBlock,  // not taken: keep it and wait for NetPeer::tx_ready()
};

class NetBackend {
 public:
  virtual ~NetBackend() = default;

  // "tap" or "user": what the report calls the back-end.
  virtual std::string_view kind() const noexcept = 0;

  // The device that takes this back-end's frames; nullptr detaches it (before the device goes
  // away). Frames flow only while a peer is attached.
  virtual void attach(NetPeer* peer) = 0;

  // One frame from the guest (kMinFrameBytes..kMaxFrameBytes; the device checked).
  virtual NetTxResult transmit(std::span<const std::uint8_t> frame) noexcept = 0;
  // The device ends a run of transmit() calls and is about to return to the loop: a back-end
  // that batches work per run (libslirp re-reads its socket set) does it here.
  virtual void transmit_done() noexcept {}

  // The guest posted receive buffers after offer_frame() said false: offer again.
  virtual void rx_space() noexcept = 0;

  // The back-end's own counters (write stalls, drops, sockets), under the device's report.
  virtual void report(ReportWriter& out) const = 0;
};

}  // namespace minivmm::devices
