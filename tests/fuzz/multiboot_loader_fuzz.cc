// libFuzzer target: the multiboot v1 loader (header search and checksum, ELF32 segments, the
// multiboot info block, cmdline, module). Input format and checks: kernel_loader_fuzz.h.
#include "tests/fuzz/kernel_loader_fuzz.h"
#include "vmm/boot/multiboot_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  minivmm::fuzz::run_loader(data, size, [](const minivmm::devices::GuestMemory& mem,
                                           const minivmm::fuzz::LoaderInput& in) {
    minivmm::vmm::MultibootOptions opts;
    opts.cmdline = in.cmdline;
    opts.initrd = in.initrd;
    return minivmm::vmm::load_multiboot_kernel(mem, in.image, opts);
  });
  return 0;
}
