/*
 * Constants shared by boot.S and the C files. Plain #defines only: this header
 * is included by the assembler too.
 */
#ifndef MINIVMM_GUEST_LAYOUT_H
#define MINIVMM_GUEST_LAYOUT_H

/* Linked at 1 MiB and not relocatable (boot.rst: code32_start / pref_address). */
#define KERNEL_BASE         0x100000
#define FILL_BASE           0x1000000  /* fill=N: from 16 MiB up (needs --memory >= 16 + N MiB) */
#define FILL_MAX_MIB        512
#define FILL_PATTERN        0x5a5aa5a5f00dcafeull
/* dirty=KIB: the same region (so not with fill=), one byte per 4 KiB page written every tick. */
#define DIRTY_BASE          FILL_BASE
#define DIRTY_MAX_KIB       (512u * 1024)
/* dirty=KIB: a u64 counting the passes done, in a page of its own just below the region, so a
 * VMM can keep it across its resets (minivmm --mailbox 0xfff000,4096) and see each pass end. */
#define DIRTY_PASSES        0xfff000
/* boot.rst "64-bit boot protocol": the 64-bit entry is the load address + 0x200. */
#define ENTRY64_OFFSET      0x200

/* Our GDT. 0x10/0x18 match the selectors boot.rst names __BOOT_CS/__BOOT_DS. */
#define SEL_CODE32          0x08
#define SEL_CODE64          0x10
#define SEL_DATA            0x18

/* boot_params ("zero page") offsets, boot.rst "The real-mode kernel header". */
#define BP_CMD_LINE_PTR     0x228

/* Interrupt vectors. The PICs are remapped above the 32 CPU exception vectors. */
#define VEC_PIC_MASTER      0x20   /* IRQ0..7  -> 0x20..0x27 */
#define VEC_PIC_SLAVE       0x28   /* IRQ8..15 -> 0x28..0x2f */
#define VEC_PIT             (VEC_PIC_MASTER + 0)
#define VEC_PIC_SPURIOUS_M  (VEC_PIC_MASTER + 7)
#define VEC_RTC             (VEC_PIC_SLAVE + 0)
#define VEC_PIC_SPURIOUS_S  (VEC_PIC_SLAVE + 7)
#define VEC_LAPIC_TIMER     0x40
#define VEC_NET             0x41   /* net=echo: the virtio-net device, through the I/O APIC */
#define VEC_LAPIC_SPURIOUS  0xff

/* Legacy I/O ports. */
#define PIC1_CMD            0x20
#define PIC1_DATA           0x21
#define PIC2_CMD            0xa0
#define PIC2_DATA           0xa1
#define PIC_EOI             0x20   /* OCW2: non-specific EOI */
#define PIT_CH0             0x40
#define PIT_CMD             0x43
#define RTC_INDEX           0x70
#define RTC_DATA            0x71
#define RTC_REG_A           0x0a
#define RTC_REG_B           0x0b
#define RTC_REG_C           0x0c
#define COM1                0x3f8
#define DEBUG_EXIT_PORT     0xf4
#define PVPANIC_PORT        0x505  /* QEMU's ISA pvpanic */
#define PVPANIC_PANICKED    0x01
/* The ACPI PM block at QEMU's PM_IO_BASE (minivmm's devices/pc/acpi_pm.h; QEMU's pc the same). */
#define ACPI_PM1A_EVT       0x600  /* PM1_STS; PM1_EN at +2 */
#define ACPI_PM1A_CNT       0x604
#define ACPI_PM_TMR         0x608  /* 24 bits at 3.579545 MHz */
#define ACPI_RTC_EN         0x0400 /* PM1_EN */
#define ACPI_SLP_EN         0x2000 /* PM1_CNT; SLP_TYP in bits 12:10 */
#define ACPI_SLP_TYP_S3     (1 << 10)  /* the DSDT's _S3 (QEMU's value) */
#define ACPI_SLP_TYP_S5     (0 << 10)
#define ACPI_FACS_WAKING_VECTOR 12     /* offset in the FACS */
#define S3_TRAMPOLINE       0x5000     /* real-mode waking code; free once boot.S runs */

/* Local APIC (Intel SDM vol. 3A, 11.4.1: default base after reset). */
#define LAPIC_BASE          0xfee00000
#define LAPIC_TPR           0x080
#define LAPIC_EOI           0x0b0
#define LAPIC_SVR           0x0f0
#define LAPIC_LVT_TIMER     0x320
#define LAPIC_LVT_LINT0     0x350
#define LAPIC_TIMER_ICR     0x380
#define LAPIC_TIMER_DCR     0x3e0

/* I/O APIC (82093AA data sheet; the MADT minivmm writes): registers through an index
 * (IOREGSEL) and a data window (IOWIN); redirection entry N at 0x10 + 2N (low) and
 * 0x11 + 2N (high: destination APIC id in bits 31:24). */
#define IOAPIC_BASE         0xfec00000
#define IOAPIC_REGSEL       0x00
#define IOAPIC_WINDOW       0x10

/* virtio-mmio (docs/virtio.md): minivmm maps its devices at fixed windows from
 * 0xd0000000, 4 KiB apart; the guest probes them there when the command line
 * names no virtio_mmio.device= windows. QEMU's microvm puts its 24 transports
 * at 0xfeb00000, 512 bytes apart. boot.S maps the 2 MiB page holding each
 * range uncached, and only windows inside those two pages are used. */
#define VIRTIO_MMIO_BASE    0xd0000000
#define VIRTIO_MMIO_STRIDE  0x1000
#define VIRTIO_MMIO_SLOTS   5
#define MMIO_MICROVM_PAGE   0xfea00000   /* the 2 MiB page holding 0xfeb00000 */
#define MMIO_PAGE_SIZE      0x200000

/* Guest RAM the virtio drivers use (identity-mapped, above the kernel at
 * 1 MiB, below the 64 MiB minimum of RAM). 4 KiB of rings per queue
 * (virtio.h); blk and console use 4 entries, net NET_QSIZE. */
#define VQ_BLK_BASE         0x200000
#define VQ_CON_BASE         0x210000
#define VQ_NET_RX_BASE      0x230000
#define VQ_NET_TX_BASE      0x231000
/* net=echo's buffers, one per receive descriptor: the 12-byte virtio-net
 * header and a frame of up to 2036 bytes (an MTU of 1500 needs 1514). */
#define NET_QSIZE           32
#define NET_BUF_BASE        0x240000
#define NET_BUF_SIZE        0x800
#define BLK_HDR_ADDR        0x220000
#define BLK_STATUS_ADDR     0x220100
#define CON_BUF_ADDR        0x221000
#define CON_BUF_SIZE        0x1000
#define BLK_DATA_ADDR       0x300000   /* one request's data, BLK_CHUNK bytes */
#define BLK_CHUNK           0x100000   /* 1 MiB per read request */
#define BLK_CHECK_ADDR      0x400000   /* the scratch range read back */
#define BLK_SCRATCH_SECTORS 64

/* Debug-exit values (the VMM / QEMU exit status is (value << 1) | 1). */
#define EXIT_OK             0x00
#define EXIT_BAD_CMDLINE    0x01
#define EXIT_NO_DEVICE      0x02   /* blk=check / console=virtio / net=echo without the device */
#define EXIT_PANIC_UNHEARD  0x03   /* panic: no pvpanic device ended the run */
#define EXIT_S5_UNHEARD     0x04   /* poweroff: nothing took the ACPI S5 write */
#define EXIT_EXCEPTION      0x7f

#endif
