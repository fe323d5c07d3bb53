// libFuzzer target: the PVH loader (ELF64 headers, PT_LOAD segments, the Xen entry note,
// hvm_start_info, cmdline, initrd module). Input format and checks: kernel_loader_fuzz.h.
#include "tests/fuzz/kernel_loader_fuzz.h"
#include "vmm/boot/pvh_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  minivmm::fuzz::run_loader(data, size, [](const minivmm::devices::GuestMemory& mem,
                                           const minivmm::fuzz::LoaderInput& in) {
    minivmm::vmm::PvhOptions opts;
    opts.cmdline = in.cmdline;
    opts.initrd = in.initrd;
    opts.acpi_rsdp_addr = 0xe0000;
    return minivmm::vmm::load_pvh_kernel(mem, in.image, opts);
  });
  return 0;
}
