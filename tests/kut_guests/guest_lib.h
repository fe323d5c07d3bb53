/* Port I/O, COM1 output and the multiboot info for the test guests. Header-only. */
#ifndef MINIVMM_KUT_GUEST_LIB_H
#define MINIVMM_KUT_GUEST_LIB_H

#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outw(uint16_t port, uint16_t v) { __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outl(uint16_t port, uint32_t v) { __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port) { uint8_t v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline uint16_t inw(uint16_t port) { uint16_t v; __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline uint32_t inl(uint16_t port) { uint32_t v; __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port)); return v; }

static inline void putc_com1(char c) {
  while ((inb(0x3fd) & 0x20) == 0) {
  }
  outb(0x3f8, (uint8_t)c);
}
static inline void puts_com1(const char* s) {
  while (*s) putc_com1(*s++);
}
static inline void putu_com1(uint32_t v) {
  char buf[11];
  int i = 10;
  buf[i] = 0;
  do {
    buf[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  puts_com1(&buf[i]);
}

/* Multiboot info (spec 3.3): only the fields the guests read. */
struct mb_info {
  uint32_t flags, mem_lower, mem_upper, boot_device, cmdline, mods_count, mods_addr;
  uint32_t syms[4];
  uint32_t mmap_length, mmap_addr;
};

/* "key=N" in the command line, or `dflt`. */
static inline uint32_t cmdline_u32(const struct mb_info* mb, const char* key, uint32_t dflt) {
  if ((mb->flags & 4) == 0) return dflt;
  const char* s = (const char*)mb->cmdline;
  for (; *s; ++s) {
    const char* k = key;
    const char* p = s;
    while (*k && *p == *k) ++k, ++p;
    if (*k == 0 && *p == '=') {
      uint32_t v = 0;
      for (++p; *p >= '0' && *p <= '9'; ++p) v = v * 10 + (uint32_t)(*p - '0');
      return v;
    }
  }
  return dflt;
}

#endif
