// The init's executable, built by vmm/CMakeLists.txt from guest/exec_init/ (a static binary,
// never this build's compiler flags), and placed in minivmm's read-only data by the assembler:
// `minivmm exec` needs no file beside it.
#include <cstdint>
#include <span>

#include "vmm/exec/exec_run.h"

#ifndef MINIVMM_EXEC_INIT_PATH
#error "MINIVMM_EXEC_INIT_PATH: the built init's path (vmm/CMakeLists.txt sets it)"
#endif

asm(".section .rodata\n"
    ".balign 16\n"
    ".globl minivmm_exec_init_begin\n"
    ".hidden minivmm_exec_init_begin\n"
    "minivmm_exec_init_begin:\n"
    ".incbin \"" MINIVMM_EXEC_INIT_PATH "\"\n"
    ".globl minivmm_exec_init_end\n"
    ".hidden minivmm_exec_init_end\n"
    "minivmm_exec_init_end:\n"
    ".previous\n");

extern "C" const std::uint8_t minivmm_exec_init_begin[];
extern "C" const std::uint8_t minivmm_exec_init_end[];

namespace minivmm::vmm::exec {

std::span<const std::uint8_t> exec_init_image() noexcept {
  return {minivmm_exec_init_begin, minivmm_exec_init_end};
}

}  // namespace minivmm::vmm::exec
