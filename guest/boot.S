/*
 * boot.S - entry paths, descriptor tables, page tables and interrupt stubs of
 * the minivmm test guest.
 *
 * The file is a bzImage as far as a loader can tell (Documentation/arch/x86/
 * boot.rst): a real-mode setup area of (SETUP_SECTS + 1) * 512 bytes holding
 * the setup header, followed by the protected-mode kernel that the loader
 * copies to 1 MiB. Three ways in, all ending in startup_64:
 *
 *   real mode   setup_entry, at setup + 0x200, jumped to as seg+0x20:0 by a
 *               16-bit loader (QEMU's linuxboot option ROM, GRUB's "linux16").
 *   32-bit      startup_32 = code32_start = 0x100000 (32-bit boot protocol).
 *   64-bit      startup_64 = 0x100200 (64-bit boot protocol, minivmm).
 *
 * The host's KVM emulates every instruction here, so everything a table can
 * hold is a table built by the assembler and linker (GDT, IDT, page tables),
 * and no path executes more than a couple of dozen instructions.
 */
#include "layout.h"

        .set    SETUP_SECTS, 1          /* must match SETUP_SIZE in guest.ld */

/* Paging-structure bits, Intel SDM vol. 3A, "4-Level Paging". */
        .set    PTE_P,   0x001
        .set    PTE_W,   0x002
        .set    PTE_PWT, 0x008
        .set    PTE_PCD, 0x010
        .set    PTE_PS,  0x080          /* 2 MiB page in a PD entry */

        .set    CR0_PE,  0x00000001
        .set    CR0_PG,  0x80000000
        .set    CR4_PAE, 0x00000020
        .set    MSR_EFER, 0xc0000080
        .set    EFER_LME, 0x00000100

/* Mode switches the boot paths and the S3 resume share (one spelling each).
 * REAL_TO_PROTECTED: from real mode, with a GDT register image at the
 * CS-relative address gdtr_at, into 32-bit code at target.
 * PROTECTED_TO_LONG: from flat 32-bit protected mode with paging off
 * (Intel SDM vol. 3A, "Initializing IA-32e Mode": PAE, CR3, EFER.LME, then
 * CR0.PG) into 64-bit code at target; exactly PG|PE, as Linux does: clears
 * CD/NW a firmware may leave.
 * FLAT_DATA_SEGMENTS: every data segment register to our flat data segment. */
        .macro  REAL_TO_PROTECTED gdtr_at, target
        lgdtl   %cs:(\gdtr_at)
        movl    %cr0, %eax
        orb     $CR0_PE, %al
        movl    %eax, %cr0
        ljmpl   $SEL_CODE32, $\target
        .endm

        .macro  PROTECTED_TO_LONG target
        movl    $CR4_PAE, %eax
        movl    %eax, %cr4
        movl    $pml4, %eax
        movl    %eax, %cr3
        movl    $MSR_EFER, %ecx
        rdmsr
        orl     $EFER_LME, %eax
        wrmsr
        movl    $(CR0_PG | CR0_PE), %eax
        movl    %eax, %cr0
        ljmpl   $SEL_CODE64, $\target
        .endm

        .macro  FLAT_DATA_SEGMENTS
        movl    $SEL_DATA, %eax
        movl    %eax, %ds
        movl    %eax, %es
        movl    %eax, %ss
        movl    %eax, %fs
        movl    %eax, %gs
        .endm

/* ===================================================================== */
/* Real-mode setup area: file offset 0, loaded anywhere below 1 MiB.      */
/* ===================================================================== */
        .section .setup, "ax"
        .code16
        .globl  setup_start
setup_start:
        /* 0x000: legacy boot sector. Not bootable from a disk by itself
         * (Linux dropped that in 2.6.24 too); loaders only read 0x1f1+. */

/* The setup header. Each .org both documents the boot.rst offset and makes
 * the assembler fail if a field before it grew. */
        .org    0x1f1
hdr:
        .byte   SETUP_SECTS             /* 0x1f1 setup_sects */
        .org    0x1f2
        .word   0                       /* 0x1f2 root_flags */
        .org    0x1f4
        .long   kernel_syssize          /* 0x1f4 syssize: 16-byte paragraphs */
        .org    0x1f8
        .word   0                       /* 0x1f8 ram_size (obsolete) */
        .org    0x1fa
        .word   0xffff                  /* 0x1fa vid_mode: NORMAL_VGA */
        .org    0x1fc
        .word   0                       /* 0x1fc root_dev */
        .org    0x1fe
        .word   0xaa55                  /* 0x1fe boot_flag */
        .org    0x200
        /* 0x200 jump: a 2-byte short jump, as boot.rst requires. Loaders
         * (minivmm's among them) treat 0x202 + this byte as the header end. */
        .byte   0xeb, setup_entry - 1f
1:
        .org    0x202
        .ascii  "HdrS"                  /* 0x202 header magic */
        .org    0x206
        /* 2.12: the oldest protocol with xloadflags, the only way a loader
         * learns the image has the 64-bit entry point. */
        .word   0x020c                  /* 0x206 version */
        .org    0x208
        .long   0                       /* 0x208 realmode_swtch */
        .org    0x20c
        .word   0x1000                  /* 0x20c start_sys_seg (obsolete) */
        .org    0x20e
        .word   kernel_version_str - 0x200  /* 0x20e kernel_version */
        .org    0x210
        .byte   0                       /* 0x210 type_of_loader (loader writes) */
        .org    0x211
        .byte   0x01                    /* 0x211 loadflags: LOADED_HIGH */
        .org    0x212
        .word   0x8000                  /* 0x212 setup_move_size (<= 2.01 only) */
        .org    0x214
        .long   KERNEL_BASE             /* 0x214 code32_start */
        .org    0x218
        .long   0                       /* 0x218 ramdisk_image */
        .org    0x21c
        .long   0                       /* 0x21c ramdisk_size */
        .org    0x220
        .long   0                       /* 0x220 bootsect_kludge */
        .org    0x224
        .word   0                       /* 0x224 heap_end_ptr (loader writes) */
        .org    0x226
        .byte   0                       /* 0x226 ext_loader_ver */
        .org    0x227
        .byte   0                       /* 0x227 ext_loader_type */
        .org    0x228
        .long   0                       /* 0x228 cmd_line_ptr (loader writes) */
        .org    0x22c
        .long   0x7fffffff              /* 0x22c initrd_addr_max */
        .org    0x230
        .long   0x100000                /* 0x230 kernel_alignment */
        .org    0x234
        .byte   0                       /* 0x234 relocatable_kernel: no */
        .org    0x235
        .byte   20                      /* 0x235 min_alignment: log2(1 MiB) */
        .org    0x236
        .word   0x0001                  /* 0x236 xloadflags: XLF_KERNEL_64 */
        .org    0x238
        .long   2047                    /* 0x238 cmdline_size */
        .org    0x23c
        .long   0                       /* 0x23c hardware_subarch: default PC */
        .org    0x240
        .quad   0                       /* 0x240 hardware_subarch_data */
        .org    0x248
        .long   0                       /* 0x248 payload_offset */
        .org    0x24c
        .long   0                       /* 0x24c payload_length */
        .org    0x250
        .quad   0                       /* 0x250 setup_data (loader writes) */
        .org    0x258
        .quad   KERNEL_BASE             /* 0x258 pref_address */
        .org    0x260
        .long   kernel_init_size        /* 0x260 init_size: through .bss */
        .org    0x264
        .long   0                       /* 0x264 handover_offset: no EFI */
        .org    0x268

/*
 * Real-mode entry (boot.rst "Running the kernel": CS = setup_seg + 0x20,
 * IP = 0, DS = ES = SS = setup_seg). Go straight to 32-bit protected mode
 * with interrupts off and continue at code32_start: there is nothing to do
 * in real mode, and this KVM cannot emulate a 32-bit iret, so no interrupt
 * may happen before long mode. No stack is used.
 */
setup_entry:
        cli
        /* Fast A20 gate (port 0x92 bit 1, bit 0 would reset the CPU): the
         * kernel runs above 1 MiB, and a real-mode loader need not have
         * enabled A20 (Linux's own setup code enables it too). */
        inb     $0x92, %al
        orb     $0x02, %al
        andb    $0xfe, %al
        outb    %al, $0x92
        /* %esi = linear address of the setup segment. The setup header
         * lies at 0x1f1 both there and in boot_params, so startup_64 can
         * read cmd_line_ptr through it as if it were the zero page.
         * Derived from CS, which the loader's far jump itself fixes,
         * rather than from DS. */
        movw    %cs, %si
        subw    $0x20, %si
        movzwl  %si, %esi
        shll    $4, %esi
        /* CS-relative: CS's base is setup_start + 0x200. */
        REAL_TO_PROTECTED rm_gdtr-0x200, startup_32

        .balign 4
rm_gdtr:
        .word   gdt_end - gdt - 1
        .long   gdt                     /* linear; lgdtl reads 32 bits */

kernel_version_str:
        .asciz  "minivmm-guest"

        .org    (SETUP_SECTS + 1) * 512

/* ===================================================================== */
/* Protected-mode kernel: loaded at KERNEL_BASE (file offset SETUP_SIZE). */
/* ===================================================================== */
        .section .head, "ax"
        .code32
/*
 * 32-bit entry (boot.rst "32-bit boot protocol"): flat 4 GiB segments,
 * paging and interrupts off, %esi = boot_params. Loaders' GDTs differ, so
 * load ours; then enable long mode and far-jump into the 64-bit code
 * segment.
 * Only %cs is known to be flat here, hence the %cs override.
 */
        .globl  startup_32
startup_32:
        cli
        lgdtl   %cs:gdtr
        PROTECTED_TO_LONG from32

        .code64
from32:
        /* The upper halves of the GPRs are undefined after the switch
         * (SDM vol. 1, "General-Purpose Registers in 64-Bit Mode"), and
         * startup_64 takes boot_params as a 64-bit pointer. */
        movl    %esi, %esi
        jmp     startup_64

        .org    ENTRY64_OFFSET, 0xf4
/*
 * 64-bit entry (boot.rst "64-bit boot protocol"): long mode, paging on with
 * the loader's identity map, interrupts off, %rsi = boot_params. Trust
 * nothing else: load our own GDT, segments, page tables, stack and IDT.
 * Our page tables identity-map the first 1 GiB, so boot_params and the
 * command line must lie there (true for QEMU and minivmm).
 */
        .globl  startup_64
startup_64:
        cli
        cld
        lgdt    gdtr(%rip)
        FLAT_DATA_SEGMENTS
        movl    $pml4, %eax
        movq    %rax, %cr3
        movl    $stack_top, %esp
        /* Reload %cs with a far return: unlike a far jump it needs no
         * pointer in memory. */
        pushq   $SEL_CODE64
        pushq   $1f
        lretq
1:      lidt    idtr(%rip)
        movq    %rsi, %rdi
        call    kmain
        /* kmain does not return. */
        .globl  halt_forever
halt_forever:
        cli
        hlt
        jmp     halt_forever

/*
 * Interrupt handlers. Kept in this section so every handler's address has
 * the same bits 31:16 (guest.ld asserts it) and the static IDT below needs
 * only a per-handler low half. All are 64-bit interrupt gates, so IF is
 * already clear on entry. A tick costs ~6 instructions here.
 */

/* CPU exceptions 0..31: a 16-byte stub per vector pushes a dummy error code
 * where the CPU pushes none (SDM vol. 3A, "Exception and Interrupt
 * Reference", "Exception Error Code" of each vector),
 * then the vector, so exc_common sees one frame layout. */
        .balign 512                     /* 32 * 16 bytes, no carry into bit 16 */
        .globl  exc_stubs
exc_stubs:
        .set    vec, 0
        .rept   32
        .balign 16
        .set    has_err, (vec == 8) || (vec >= 10 && vec <= 14) || (vec == 17)
        .set    has_err, has_err || (vec == 21) || (vec == 29) || (vec == 30)
        .if     !has_err
        pushq   $0
        .endif
        pushq   $vec
        jmp     exc_common
        .set    vec, vec + 1
        .endr
        /* Fails to assemble (".org backwards") if a stub outgrew 16 bytes. */
        .org    exc_stubs + 32 * 16, 0xf4

exc_common:
        movq    0(%rsp), %rdi           /* vector */
        movq    8(%rsp), %rsi           /* error code */
        movq    16(%rsp), %rdx          /* faulting %rip */
        andq    $-16, %rsp
        call    exception_report        /* prints, exits through 0xf4 */
        jmp     halt_forever

/* i8254 PIT via master PIC IRQ0. */
        .globl  isr_pit
isr_pit:
        incq    tick_count(%rip)
        pushq   %rax
        movb    $PIC_EOI, %al
        outb    %al, $PIC1_CMD
        popq    %rax
        iretq

/* MC146818 RTC via slave PIC IRQ8. Reading register C acknowledges the
 * periodic flag and drops IRQ8; without it no further interrupt comes
 * (MC146818A data sheet, "Register C"). The slave's IRQ8 reaches the CPU
 * through the master's IRQ2, so both PICs need an EOI. */
        .globl  isr_rtc
isr_rtc:
        incq    tick_count(%rip)
        pushq   %rax
        movb    $RTC_REG_C, %al
        outb    %al, $RTC_INDEX
        inb     $RTC_DATA, %al
        movb    $PIC_EOI, %al
        outb    %al, $PIC2_CMD
        outb    %al, $PIC1_CMD
        popq    %rax
        iretq

/* Local APIC timer: any write to the EOI register (SDM vol. 3A, "End-of-Interrupt"). */
        .globl  isr_lapic
isr_lapic:
        incq    tick_count(%rip)
        pushq   %rax
        movl    $(LAPIC_BASE + LAPIC_EOI), %eax
        movl    $0, (%rax)
        popq    %rax
        iretq

/* net=echo's virtio-net interrupt through the I/O APIC (edge): count it and
 * EOI; the wakeup is the point, kernel.c's idle loop then polls the rings. */
        .globl  isr_net
isr_net:
        incq    net_irqs(%rip)
        pushq   %rax
        movl    $(LAPIC_BASE + LAPIC_EOI), %eax
        movl    $0, (%rax)
        popq    %rax
        iretq

/* A spurious IRQ15 from the slave was real to the master (it saw IRQ2), so
 * the master, and only the master, wants an EOI. A spurious IRQ7 and the
 * APIC spurious vector want none (8259A data sheet; SDM vol. 3A, "Spurious
 * Interrupt"). */
        .globl  isr_spurious_slave
isr_spurious_slave:
        pushq   %rax
        movb    $PIC_EOI, %al
        outb    %al, $PIC1_CMD
        popq    %rax
        .globl  isr_spurious
isr_spurious:
        iretq
        .globl  isr_end
isr_end:

/* ===================================================================== */
/* ACPI S3 (s3 / s3=rtc, acpi.c): sleep and the resume path.               */
/* ===================================================================== */
        .section .text, "ax"
/*
 * int acpi_s3_sleep(uint16_t pm1a_cnt, uint16_t value): writes SLP_TYP|SLP_EN
 * with the callee-saved registers and %rsp saved. A VMM that takes the write
 * stops the CPU at the OUT; the wake starts the boot CPU in real mode at the
 * FACS waking vector, the copy of s3_tramp below, which comes back through
 * s3_resume32/64 and returns 1 from here. A VMM that ignores the write lets
 * the OUT return: 0. Interrupts are off on both ways out (the caller's cli).
 */
        .code64
        .globl  acpi_s3_sleep
acpi_s3_sleep:
        pushq   %rbx
        pushq   %rbp
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        movq    %rsp, s3_saved_rsp(%rip)
        movl    %esi, %eax
        movl    %edi, %edx
        outw    %ax, %dx
        xorl    %eax, %eax
        jmp     1f
s3_resume64:
        FLAT_DATA_SEGMENTS
        lidt    idtr(%rip)
        movq    s3_saved_rsp(%rip), %rsp
        movl    $1, %eax
1:      popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbp
        popq    %rbx
        ret

/* From the trampoline: flat 32-bit protected mode, paging off. Long mode
 * again as startup_32 enters it (the GDT is loaded already). */
        .code32
s3_resume32:
        PROTECTED_TO_LONG s3_resume64

/* The real-mode waking code, copied to S3_TRAMPOLINE (below 1 MiB) whose
 * address goes into the FACS: CS = S3_TRAMPOLINE >> 4, IP = 0, so labels
 * are CS-relative. GDT, protected mode, then s3_resume32. */
        .code16
        .globl  s3_tramp, s3_tramp_end
s3_tramp:
        cli
        REAL_TO_PROTECTED s3_tramp_gdtr-s3_tramp, s3_resume32
        .balign 4
s3_tramp_gdtr:
        .word   gdt_end - gdt - 1
        .long   gdt
s3_tramp_end:
        .code64

/* ===================================================================== */
/* Data. Everything is initialised here rather than in .bss: nothing     */
/* promises the memory behind our image is zero, and zeroing costs       */
/* instructions this KVM emulates one by one.                            */
/* ===================================================================== */
        .section .data, "aw"
        .balign 16
/* Flat descriptors (SDM vol. 3A, "Segment Descriptors"), accessed bit
 * preset so loading a selector never writes the GDT back. */
gdt:
        .quad   0
        .quad   0x00cf9b000000ffff      /* 0x08: 32-bit code, 4 GiB */
        .quad   0x00af9b000000ffff      /* 0x10: 64-bit code (L=1) */
        .quad   0x00cf93000000ffff      /* 0x18: data, 4 GiB */
gdt_end:

        .balign 8
gdtr:
        .word   gdt_end - gdt - 1
        .quad   gdt                     /* 32-bit lgdt reads the low half */

        .balign 8
idtr:
        .word   idt_end - idt - 1
        .quad   idt

        .balign 8
s3_saved_rsp:                           /* acpi_s3_sleep's stack, for the resume */
        .quad   0

        .balign 8
        .globl  tick_count
tick_count:
        .quad   0
        .globl  net_irqs
net_irqs:
        .quad   0

/* A 64-bit interrupt gate (SDM vol. 3A, "64-Bit Mode IDT"): present, DPL 0, type 0xe.
 * The handler's address halves come from guest.ld (idt_hi and the
 * idt_lo_* symbols), because a relocation cannot split an address. */
        .macro  GATE lo
        .word   \lo
        .word   SEL_CODE64
        .byte   0, 0x8e
        .word   idt_hi
        .long   0, 0
        .endm

        .macro  GATE_AT vector, lo
        .org    idt + (\vector) * 16
        GATE    \lo
        .endm

        .balign 16
idt:
        .set    vec, 0
        .rept   32
        GATE    (idt_lo_exc + vec * 16)
        .set    vec, vec + 1
        .endr
        GATE_AT VEC_PIT, idt_lo_pit
        GATE_AT VEC_PIC_SPURIOUS_M, idt_lo_spurious
        GATE_AT VEC_RTC, idt_lo_rtc
        GATE_AT VEC_PIC_SPURIOUS_S, idt_lo_spurious_slave
        GATE_AT VEC_LAPIC_TIMER, idt_lo_lapic
        GATE_AT VEC_NET, idt_lo_net
        GATE_AT VEC_LAPIC_SPURIOUS, idt_lo_spurious
        /* Vectors left out are not-present: a stray one raises #NP, which
         * the exception path reports. */
idt_end:

/*
 * Page tables (SDM vol. 3A, "4-Level Paging"): PML4[0] -> PDPT; PDPT[0] -> a PD mapping
 * 0-1 GiB in 2 MiB pages (us, the loader's boot_params and command line);
 * PDPT[3] -> a PD holding only MMIO, uncached (PCD|PWT), as MMIO must be: minivmm's
 * virtio-mmio windows (0xd0000000), QEMU microvm's (the page at 0xfea00000, which holds
 * 0xfeb00000), and the I/O and local APIC pages. Static, so building them costs no
 * instruction.
 */
        .section .data.pagetables, "aw"
        .balign 4096
pml4:
        .quad   pdpt + PTE_P + PTE_W
        .fill   511, 8, 0
pdpt:
        .quad   pd_low + PTE_P + PTE_W
        .quad   0
        .quad   0
        .quad   pd_apic + PTE_P + PTE_W
        .fill   508, 8, 0
pd_low:
        .set    i, 0
        .rept   512
        .quad   (i << 21) + PTE_PS + PTE_P + PTE_W
        .set    i, i + 1
        .endr
pd_apic:
        .set    VIRTIO_PDE, (VIRTIO_MMIO_BASE - 0xc0000000) >> 21
        .set    MICROVM_PDE, (MMIO_MICROVM_PAGE - 0xc0000000) >> 21
        .set    IOAPIC_PDE, (IOAPIC_BASE - 0xc0000000) >> 21
        .set    APIC_PDE, (LAPIC_BASE - 0xc0000000) >> 21
        .if     (APIC_PDE != IOAPIC_PDE + 1) || (IOAPIC_PDE != MICROVM_PDE + 1)
        .error  "microvm's virtio page, the I/O APIC and local APIC pages are expected in adjacent 2 MiB entries"
        .endif
        .fill   VIRTIO_PDE, 8, 0
        .quad   VIRTIO_MMIO_BASE + PTE_PS + PTE_PCD + PTE_PWT + PTE_P + PTE_W
        .fill   MICROVM_PDE - VIRTIO_PDE - 1, 8, 0
        .quad   MMIO_MICROVM_PAGE + PTE_PS + PTE_PCD + PTE_PWT + PTE_P + PTE_W
        .quad   IOAPIC_BASE + PTE_PS + PTE_PCD + PTE_PWT + PTE_P + PTE_W
        .quad   LAPIC_BASE + PTE_PS + PTE_PCD + PTE_PWT + PTE_P + PTE_W
        .fill   511 - APIC_PDE, 8, 0

        .section .bss.stack, "aw", @nobits
        .balign 16
stack:
        .skip   4096
stack_top:

        .section .note.GNU-stack, "", @progbits
