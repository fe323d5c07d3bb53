#include "vmm/kvm/vm.h"

#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "timers/syscall_counters.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

// Above the 3 GiB RAM ceiling and below the IOAPIC/LAPIC pages, where kvmtool and Firecracker
// put them: three pages for the TSS Intel's vmx real-mode emulation needs, one for its EPT
// identity map.
constexpr std::uint64_t kTssAddress = 0xfffbd000;
constexpr std::uint64_t kIdentityMapAddress = 0xfffbc000;

}  // namespace

Vm::Vm(const Kvm& kvm, devices::GuestMemory ram) : kvm_(kvm), memory_(ram) {
  kvm.require(KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY");
  kvm.require(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP");
  kvm.require(KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR");
  kvm.require(KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID");
  kvm.require(KVM_CAP_IRQFD, "KVM_CAP_IRQFD");
  kvm.require(KVM_CAP_IRQ_INJECT_STATUS, "KVM_CAP_IRQ_INJECT_STATUS");
  kvm.require(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT");

  fd_.reset(::ioctl(kvm.fd(), KVM_CREATE_VM, 0));
  if (!fd_.valid()) throw_kvm_error("KVM_CREATE_VM");

  if (::ioctl(fd_.get(), KVM_SET_TSS_ADDR, kTssAddress) < 0) throw_kvm_error("KVM_SET_TSS_ADDR");
  std::uint64_t identity = kIdentityMapAddress;
  if (::ioctl(fd_.get(), KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0) {
    throw_kvm_error("KVM_SET_IDENTITY_MAP_ADDR");
  }

  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = ram.size();
  region.userspace_addr = reinterpret_cast<std::uint64_t>(ram.bytes().data());
  if (::ioctl(fd_.get(), KVM_SET_USER_MEMORY_REGION, &region) < 0) {
    throw_kvm_error("KVM_SET_USER_MEMORY_REGION");
  }

  if (::ioctl(fd_.get(), KVM_CREATE_IRQCHIP, 0) < 0) throw_kvm_error("KVM_CREATE_IRQCHIP");
}

Vm::~Vm() = default;

void Vm::set_pics_as_bios_leaves_them(bool timer_unmasked) {
  // IBM PC/AT BIOS vector bases (SeaBIOS pic_reset(0x08, 0x70)).
  const struct {
    std::uint32_t chip;
    std::uint8_t base;
    std::uint8_t mask;
  } pics[] = {{KVM_IRQCHIP_PIC_MASTER, 0x08,
               static_cast<std::uint8_t>(timer_unmasked ? 0xfa : 0xfb)},
              {KVM_IRQCHIP_PIC_SLAVE, 0x70, 0xff}};
  for (const auto& p : pics) {
    kvm_irqchip chip{};
    chip.chip_id = p.chip;
    if (::ioctl(fd_.get(), KVM_GET_IRQCHIP, &chip) < 0) throw_kvm_error("KVM_GET_IRQCHIP");
    chip.chip.pic.irq_base = p.base;
    chip.chip.pic.imr = p.mask;
    chip.chip.pic.init_state = 0;  // initialisation sequence complete
    chip.chip.pic.init4 = 1;       // ICW4 was given: 8086 mode
    chip.chip.pic.auto_eoi = 0;
    chip.chip.pic.read_reg_select = 0;  // OCW3 reads IRR
    if (::ioctl(fd_.get(), KVM_SET_IRQCHIP, &chip) < 0) throw_kvm_error("KVM_SET_IRQCHIP");
  }
}

void Vm::create_kernel_pit() {
  kvm_.require(KVM_CAP_PIT2, "KVM_CAP_PIT2");
  kvm_pit_config config{};
  // Port 0x61 is then KVM's too (speaker dummy), as Firecracker configures it.
  config.flags = KVM_PIT_SPEAKER_DUMMY;
  if (::ioctl(fd_.get(), KVM_CREATE_PIT2, &config) < 0) throw_kvm_error("KVM_CREATE_PIT2");
}

int Vm::irq_line(std::uint32_t gsi, bool level) const noexcept {
  kvm_irq_level irq{};
  irq.irq = gsi;
  irq.level = level ? 1 : 0;
  timers::thread_syscalls().add(timers::Syscall::kIoctl);
  if (::ioctl(fd_.get(), KVM_IRQ_LINE_STATUS, &irq) < 0) return -errno;
  return irq.status;
}

void Vm::add_irqfd(int eventfd, std::uint32_t gsi, int resamplefd) const {
  kvm_irqfd req{};
  req.fd = static_cast<__u32>(eventfd);
  req.gsi = gsi;
  if (resamplefd >= 0) {
    req.flags = KVM_IRQFD_FLAG_RESAMPLE;
    req.resamplefd = static_cast<__u32>(resamplefd);
  }
  if (::ioctl(fd_.get(), KVM_IRQFD, &req) < 0) throw_kvm_error("KVM_IRQFD");
}

namespace {

kvm_ioeventfd ioeventfd_request(int eventfd, std::uint64_t gpa, std::uint32_t datamatch) {
  kvm_ioeventfd req{};
  req.datamatch = datamatch;
  req.addr = gpa;
  req.len = 4;
  req.fd = eventfd;
  req.flags = KVM_IOEVENTFD_FLAG_DATAMATCH;
  return req;
}

}  // namespace

void Vm::add_ioeventfd(int eventfd, std::uint64_t gpa, std::uint32_t datamatch) const {
  kvm_ioeventfd req = ioeventfd_request(eventfd, gpa, datamatch);
  if (::ioctl(fd_.get(), KVM_IOEVENTFD, &req) < 0) throw_kvm_error("KVM_IOEVENTFD");
}

void Vm::remove_ioeventfd(int eventfd, std::uint64_t gpa, std::uint32_t datamatch) const noexcept {
  kvm_ioeventfd req = ioeventfd_request(eventfd, gpa, datamatch);
  req.flags |= KVM_IOEVENTFD_FLAG_DEASSIGN;
  ::ioctl(fd_.get(), KVM_IOEVENTFD, &req);
}

void Vm::remove_irqfd(int eventfd, std::uint32_t gsi) const noexcept {
  kvm_irqfd req{};
  req.fd = static_cast<__u32>(eventfd);
  req.gsi = gsi;
  req.flags = KVM_IRQFD_FLAG_DEASSIGN;
  ::ioctl(fd_.get(), KVM_IRQFD, &req);
}

}  // namespace minivmm::vmm
