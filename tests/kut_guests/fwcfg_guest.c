/*
 * fwcfg_guest: reads fw_cfg as kvm-unit-tests does (lib/x86/fwcfg.c: 16-bit selector write to
 * 0x510, byte reads from 0x511) and checks it against the command line `cpus=N mem=MiB`.
 * Exit: 0 ok, 1 signature, 2 CPU count, 3 RAM size, 4 unknown key not zero, 5 file directory,
 * 6 max CPUs.
 */
#include "guest_lib.h"

static void fw_select(uint16_t key) { outw(0x510, key); }
static uint64_t fw_le(uint16_t key, int bytes) {
  uint64_t v = 0;
  fw_select(key);
  for (int i = 0; i < bytes; ++i) v |= (uint64_t)inb(0x511) << (8 * i);
  return v;
}

uint32_t guest_main(const struct mb_info* mb);
uint32_t guest_main(const struct mb_info* mb) {
  const uint32_t cpus = cmdline_u32(mb, "cpus", 1);
  const uint32_t mem_mib = cmdline_u32(mb, "mem", 64);
  fw_select(0x00);
  if (inb(0x511) != 'Q' || inb(0x511) != 'E' || inb(0x511) != 'M' || inb(0x511) != 'U') return 1;
  const uint32_t nb = (uint32_t)fw_le(0x05, 2);
  if (nb != cpus) return 2;
  if ((uint32_t)fw_le(0x0f, 2) < nb) return 6;
  const uint64_t ram = fw_le(0x03, 8);
  if (ram != (uint64_t)mem_mib << 20) return 3;
  if (fw_le(0x11, 8) != 0) return 4; /* the suite's MAX_RAM: 0 means no limit */
  /* The directory: a big-endian count, then 64-byte entries; every byte must be readable. */
  fw_select(0x19);
  uint32_t count = 0;
  for (int i = 0; i < 4; ++i) count = (count << 8) | inb(0x511);
  if (count > 0x3fff) return 5;
  for (uint32_t i = 0; i < count * 64; ++i) (void)inb(0x511);
  puts_com1("fw_cfg: cpus ");
  putu_com1(nb);
  puts_com1(" ram ");
  putu_com1((uint32_t)(ram >> 20));
  puts_com1("M files ");
  putu_com1(count);
  puts_com1("\n");
  return 0;
}
