// One interrupt request line into the interrupt controller. Devices own the logic that drives
// it; the VMM provides the wire (KVM irqfd / KVM_IRQ_LINE), tests a recording fake.
//
// Threads: any thread (vCPU threads on register writes, the loop thread on timer expiry).
#pragma once

#include <cstdint>
#include <optional>

namespace minivmm::devices {

class IrqLine {
 public:
  virtual ~IrqLine() = default;

  virtual void set_level(bool asserted) noexcept = 0;

  // An edge for an edge-triggered ISA input: raise, then lower.
  virtual void pulse() noexcept {
    set_level(true);
    set_level(false);
  }

  // An edge raised by the calling thread itself, with no hop through a worker of the host's
  // (KVM's irqfd injects from a kernel worker thread, which a busy host may hold off for a
  // second): for ticks already late, which must not wait behind the edges that made them late.
  virtual void pulse_now() noexcept { pulse(); }

  // A pulse whose delivery is checked: false if the controller already had this interrupt
  // pending, so the edge merged with it and the guest will see one interrupt for two
  // (coalesced). Costs more than pulse() on KVM; used on the lost-tick catch-up path.
  virtual bool pulse_checked() noexcept {
    pulse();
    return true;
  }

  // How many times the guest has acknowledged (EOI'd) this interrupt so far, where the wire can
  // tell (KVM's irqfd resampler), or nullopt where it cannot. Every edge ends acknowledged,
  // merged with one still pending, or pending (at most one), so a device that counts its edges
  // finds the merged ones from this: the ticks a host-starved vCPU never saw. A syscall on KVM:
  // call it every few ticks, not per tick.
  virtual std::optional<std::uint64_t> acknowledgements() noexcept { return std::nullopt; }
  // Back to plain edges: the device found that acknowledgements never come (a controller path
  // that does not report them), and a wire that holds the line until one would starve the
  // guest. acknowledgements() returns nullopt afterwards.
  virtual void stop_acknowledgements() noexcept {}
  // A wire that holds the line raised until the guest's acknowledgement (KVM's resampler) lets
  // the level go, and goes on counting: for a line no acknowledgement has lowered for a long
  // time while edges kept coming. Returns false where there is no such level.
  virtual bool release_held_level() noexcept { return false; }
};

}  // namespace minivmm::devices
