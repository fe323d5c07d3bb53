#include "vmm/vm.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

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
constexpr std::uint64_t kMaxRam = 3ull << 30;

[[noreturn]] void fail(const char* what) {
  throw VmmError(ExitCode::kKvmUnavailable, std::string(what) + ": " + std::strerror(errno));
}

}  // namespace

void Vm::check_ram_size(std::uint64_t ram_bytes) {
  if (ram_bytes == 0 || ram_bytes % 4096 != 0 || ram_bytes > kMaxRam) {
    throw VmmError(ExitCode::kUsage, "guest memory must be a multiple of 4 KiB between 4 KiB and 3 GiB");
  }
}

Vm::Vm(const Kvm& kvm, std::uint64_t ram_bytes) : kvm_(kvm), ram_bytes_(ram_bytes) {
  check_ram_size(ram_bytes);
  kvm.require(KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY");
  kvm.require(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP");
  kvm.require(KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR");
  kvm.require(KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID");
  kvm.require(KVM_CAP_IRQFD, "KVM_CAP_IRQFD");
  kvm.require(KVM_CAP_IRQ_INJECT_STATUS, "KVM_CAP_IRQ_INJECT_STATUS");
  kvm.require(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT");

  fd_.reset(::ioctl(kvm.fd(), KVM_CREATE_VM, 0));
  if (!fd_.valid()) fail("KVM_CREATE_VM");

  if (::ioctl(fd_.get(), KVM_SET_TSS_ADDR, kTssAddress) < 0) fail("KVM_SET_TSS_ADDR");
  std::uint64_t identity = kIdentityMapAddress;
  if (::ioctl(fd_.get(), KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0) {
    fail("KVM_SET_IDENTITY_MAP_ADDR");
  }

  ram_ = ::mmap(nullptr, ram_bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ram_ == MAP_FAILED) {
    ram_ = nullptr;
    throw VmmError(ExitCode::kHostFailure,
                   "cannot map " + std::to_string(ram_bytes) + " bytes of guest memory: " +
                       std::strerror(errno));
  }
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = ram_bytes;
  region.userspace_addr = reinterpret_cast<std::uint64_t>(ram_);
  if (::ioctl(fd_.get(), KVM_SET_USER_MEMORY_REGION, &region) < 0) {
    fail("KVM_SET_USER_MEMORY_REGION");
  }
  memory_ = GuestMemory(std::span<std::byte>(static_cast<std::byte*>(ram_), ram_bytes));

  if (::ioctl(fd_.get(), KVM_CREATE_IRQCHIP, 0) < 0) fail("KVM_CREATE_IRQCHIP");
}

Vm::~Vm() {
  if (ram_) ::munmap(ram_, ram_bytes_);
}

void Vm::set_pics_as_bios_leaves_them() {
  // IBM PC/AT BIOS vector bases (SeaBIOS pic_reset(0x08, 0x70)).
  const struct {
    std::uint32_t chip;
    std::uint8_t base;
    std::uint8_t mask;
  } pics[] = {{KVM_IRQCHIP_PIC_MASTER, 0x08, 0xfb}, {KVM_IRQCHIP_PIC_SLAVE, 0x70, 0xff}};
  for (const auto& p : pics) {
    kvm_irqchip chip{};
    chip.chip_id = p.chip;
    if (::ioctl(fd_.get(), KVM_GET_IRQCHIP, &chip) < 0) fail("KVM_GET_IRQCHIP");
    chip.chip.pic.irq_base = p.base;
    chip.chip.pic.imr = p.mask;
    chip.chip.pic.init_state = 0;  // initialisation sequence complete
    chip.chip.pic.init4 = 1;       // ICW4 was given: 8086 mode
    chip.chip.pic.auto_eoi = 0;
    chip.chip.pic.read_reg_select = 0;  // OCW3 reads IRR
    if (::ioctl(fd_.get(), KVM_SET_IRQCHIP, &chip) < 0) fail("KVM_SET_IRQCHIP");
  }
}

void Vm::create_kernel_pit() {
  kvm_.require(KVM_CAP_PIT2, "KVM_CAP_PIT2");
  kvm_pit_config config{};
  // Port 0x61 is then KVM's too (speaker dummy), as Firecracker configures it.
  config.flags = KVM_PIT_SPEAKER_DUMMY;
  if (::ioctl(fd_.get(), KVM_CREATE_PIT2, &config) < 0) fail("KVM_CREATE_PIT2");
}

int Vm::irq_line(std::uint32_t gsi, bool level) const noexcept {
  kvm_irq_level irq{};
  irq.irq = gsi;
  irq.level = level ? 1 : 0;
  timers::thread_syscalls().add(timers::Syscall::kIoctl);
  if (::ioctl(fd_.get(), KVM_IRQ_LINE_STATUS, &irq) < 0) return -errno;
  return irq.status;
}

void Vm::add_irqfd(int eventfd, std::uint32_t gsi) const {
  kvm_irqfd req{};
  req.fd = static_cast<__u32>(eventfd);
  req.gsi = gsi;
  if (::ioctl(fd_.get(), KVM_IRQFD, &req) < 0) fail("KVM_IRQFD");
}

void Vm::remove_irqfd(int eventfd, std::uint32_t gsi) const noexcept {
  kvm_irqfd req{};
  req.fd = static_cast<__u32>(eventfd);
  req.gsi = gsi;
  req.flags = KVM_IRQFD_FLAG_DEASSIGN;
  ::ioctl(fd_.get(), KVM_IRQFD, &req);
}

}  // namespace minivmm::vmm
