/*
 * fwcfg.c - reads fw_cfg as kvm-unit-tests does (lib/x86/fwcfg.c) and checks it against
 * the command line: signature "QEMU" (key 0x00), ID (0x01), RAM size (0x03, 64-bit LE),
 * CPU count (0x05, 16-bit LE), max CPUs (0x0f, 16-bit LE), the file directory (0x19: a
 * big-endian count, then 64-byte entries) and an unknown key, which must read zeros.
 *
 * It also checks the multiboot memory map (the loader's e820) against the fw_cfg RAM size:
 * usable RAM at 0 and at 1 MiB, and the highest usable byte within 1 MiB below the RAM size
 * (a firmware may keep a little at the top; RAM must not reach the 32-bit MMIO hole).
 *
 * Command line: cpus=N mem=SIZE (both optional; absent means "print only").
 */
#include "lib.h"

#define FW_CFG_SIGNATURE 0x00
#define FW_CFG_ID 0x01
#define FW_CFG_RAM_SIZE 0x03
#define FW_CFG_NB_CPUS 0x05
#define FW_CFG_MAX_CPUS 0x0f
#define FW_CFG_FILE_DIR 0x19
#define FW_CFG_FILE_FIRST 0x20
#define FW_CFG_UNKNOWN 0x3fff /* beyond every QEMU entry and file slot */

static int failures;

static void fail(const char *what)
{
    put_str("fwcfg: FAIL ");
    put_str(what);
    put_str("\n");
    failures++;
}

static uint32_t read_be32(void)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = (v << 8) | fw_cfg_byte();
    return v;
}

/* Walks the directory (it must parse: sane count, selectors in the file range, names
 * NUL-terminated and non-empty). Returns the count. */
static uint32_t check_file_dir(void)
{
    fw_cfg_select(FW_CFG_FILE_DIR);
    const uint32_t count = read_be32();
    if (count > 0x1000) {
        fail("file directory count beyond 0x1000");
        return count;
    }
    for (uint32_t i = 0; i < count; i++) {
        (void)read_be32(); /* size */
        const uint16_t select = (uint16_t)(fw_cfg_byte() << 8 | fw_cfg_byte());
        (void)fw_cfg_byte();
        (void)fw_cfg_byte(); /* reserved */
        bool terminated = false;
        char first = 0;
        for (int j = 0; j < 56; j++) {
            const char c = (char)fw_cfg_byte();
            if (j == 0)
                first = c;
            if (c == 0)
                terminated = true;
        }
        if (select < FW_CFG_FILE_FIRST || !terminated || first == 0) {
            put_str("fwcfg: file entry ");
            put_dec(i);
            put_str(" select ");
            put_hex(select, 4);
            put_str("\n");
            fail("file directory entry malformed");
        }
    }
    return count;
}

/* Walks the multiboot memory map; checks it against `ram` when that is below 3 GiB. */
static void check_memory_map(const struct mb_info *mbi, uint64_t ram)
{
    if (!(mbi->flags & MB_INFO_MMAP)) {
        fail("no memory map in the multiboot info (flags bit 6)");
        return;
    }
    uint32_t entries = 0;
    bool low = false, high = false;
    uint64_t top = 0;
    for (uint32_t off = 0; off + 24 <= mbi->mmap_length && entries < 128; entries++) {
        const struct mb_mmap_entry *e = (const struct mb_mmap_entry *)(mbi->mmap_addr + off);
        const uint64_t addr = (uint64_t)e->addr_hi << 32 | e->addr_lo;
        const uint64_t end = addr + ((uint64_t)e->len_hi << 32 | e->len_lo);
        if (e->type == 1) {
            low |= addr == 0 && end >= 0x80000;
            high |= addr <= 0x100000 && end > 0x100000;
            if (end <= 0xc0000000 && end > top)
                top = end;
        }
        off += e->size + 4;
    }
    put_str("fwcfg: memory map ");
    put_dec(entries);
    put_str(" entries, usable up to ");
    put_hex((uint32_t)top, 8);
    put_str("\n");
    if (!low)
        fail("memory map: no usable RAM at 0 (at least 512 KiB)");
    if (!high)
        fail("memory map: no usable RAM at 1 MiB");
    if (ram <= 0xc0000000 && (top > ram || top + 0x100000 < ram))
        fail("memory map: usable RAM does not end within 1 MiB below the fw_cfg RAM size");
}

int guest_main(uint32_t magic, const struct mb_info *mbi);
int guest_main(uint32_t magic, const struct mb_info *mbi)
{
    const char *cl = mb_cmdline(magic, mbi);
    if (magic != MB_BOOT_MAGIC) {
        put_str("fwcfg: error: not started by a multiboot loader\n");
        return EXIT_BAD_ARGS;
    }
    bool bad = false;
    uint64_t want_cpus = 0, want_mem = 0;
    const bool have_cpus = cmdline_number(cl, "cpus", false, &want_cpus, &bad);
    const bool have_mem = cmdline_number(cl, "mem", true, &want_mem, &bad);
    if (bad)
        return EXIT_BAD_ARGS;

    fw_cfg_select(FW_CFG_SIGNATURE);
    char sig[5] = {0};
    for (int i = 0; i < 4; i++)
        sig[i] = (char)fw_cfg_byte();
    for (int i = 0; i < 4; i++) {
        if (sig[i] < 0x20 || sig[i] > 0x7e)
            sig[i] = '?';
    }
    put_str("fwcfg: signature ");
    put_str(sig);
    put_str("\n");
    if (sig[0] != 'Q' || sig[1] != 'E' || sig[2] != 'M' || sig[3] != 'U') {
        fail("signature is not \"QEMU\"");
        return EXIT_FAIL; /* nothing else can be trusted */
    }

    const uint32_t id = (uint32_t)fw_cfg_read_le(FW_CFG_ID, 4);
    const uint32_t cpus = (uint32_t)fw_cfg_read_le(FW_CFG_NB_CPUS, 2);
    const uint32_t max_cpus = (uint32_t)fw_cfg_read_le(FW_CFG_MAX_CPUS, 2);
    const uint64_t ram = fw_cfg_read_le(FW_CFG_RAM_SIZE, 8);
    const uint32_t unknown = (uint32_t)fw_cfg_read_le(FW_CFG_UNKNOWN, 4);

    put_str("fwcfg: id ");
    put_hex(id, 8);
    put_str("\nfwcfg: cpus ");
    put_dec(cpus);
    put_str(" max_cpus ");
    put_dec(max_cpus);
    put_str("\nfwcfg: ram ");
    put_hex((uint32_t)(ram >> 32), 8);
    put_str(":");
    put_hex((uint32_t)ram, 8);
    put_str(" (");
    put_dec((uint32_t)(ram >> 20));
    put_str(" MiB)\n");

    if (!(id & 1))
        fail("id bit 0 (traditional interface) clear");
    if (cpus == 0)
        fail("cpus is 0");
    if (max_cpus < cpus)
        fail("max_cpus below cpus");
    if (have_cpus && cpus != want_cpus) {
        put_str("fwcfg: expected cpus ");
        put_dec((uint32_t)want_cpus);
        put_str("\n");
        fail("cpus differs from the command line");
    }
    if (have_mem && ram != want_mem) {
        put_str("fwcfg: expected ram ");
        put_dec((uint32_t)(want_mem >> 20));
        put_str(" MiB\n");
        fail("ram differs from the command line");
    }
    if (unknown != 0)
        fail("unknown key 0x3fff does not read zeros");

    check_memory_map(mbi, ram);
    const uint32_t files = check_file_dir();
    put_str("fwcfg: files ");
    put_dec(files);
    put_str("\n");

    if (failures) {
        put_str("fwcfg: FAIL\n");
        return EXIT_FAIL;
    }
    put_str("fwcfg: PASS\n");
    return EXIT_PASS;
}
