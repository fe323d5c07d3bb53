// libFuzzer target: the bzImage loader (setup header, placement, zero page, cmdline, initrd).
// Input format and checks: kernel_loader_fuzz.h.
#include "tests/fuzz/kernel_loader_fuzz.h"
#include "vmm/boot/bzimage_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  minivmm::fuzz::run_loader(data, size, [](const minivmm::devices::GuestMemory& mem,
                                           const minivmm::fuzz::LoaderInput& in) {
    minivmm::vmm::BzImageOptions opts;
    opts.cmdline = in.cmdline;
    opts.initrd = in.initrd;
    opts.acpi_rsdp_addr = 0xe0000;
    return minivmm::vmm::load_bzimage(mem, in.image, opts);
  });
  return 0;
}
