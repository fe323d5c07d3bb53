#!/usr/bin/env python3
"""Extracts the uncompressed ELF vmlinux from an x86 bzImage and checks it can boot via PVH.

Usage: extract_vmlinux.py BZIMAGE OUTPUT [--require-pvh]

How: the bzImage setup header (boot protocol >= 2.08) gives payload_offset/payload_length of
the compressed kernel inside the protected-mode part; the compression is recognised by its
magic (gzip 1f8b08, xz fd377a585a00, zstd 28b52ffd, lzma 5d0000, bzip2 'BZh', lz4 legacy
02214c18, lzo 894c5a4f). If the header is missing or lies, the file is scanned for those magics
instead, and the first candidate that decompresses to an ELF wins. gzip, xz, lzma and bzip2
are decompressed with the Python standard library; zstd, lz4 and lzo with the system's zstd,
lz4 and lzop programs. The result must be an ELF64 x86-64 image; with --require-pvh it must
also carry the Xen ELF note XEN_ELFNOTE_PHYS32_ENTRY (type 18 = 0x12), which is what minivmm's
PVH loader enters through (Linux builds it when CONFIG_PVH=y).

Exit status: 0 on success, 1 on failure (with a message on stderr), 2 on bad usage.
Standard library only.
"""
import bz2
import gzip
import lzma
import shutil
import struct
import subprocess
import sys
import zlib

MAGICS = [
    ("gzip", b"\x1f\x8b\x08"),
    ("xz", b"\xfd7zXZ\x00"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
    ("lzma", b"\x5d\x00\x00"),
    ("bzip2", b"BZh"),
    ("lz4", b"\x02\x21\x4c\x18"),
    ("lzo", b"\x89\x4c\x5a\x4f"),
]
XEN_ELFNOTE_PHYS32_ENTRY = 18


class ExtractError(Exception):
    pass


def run_tool(argv, data):
    if shutil.which(argv[0]) is None:
        raise ExtractError(f"'{argv[0]}' is not installed (apt-get install {argv[0]})")
    p = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The kernel appends the decompressed size (4 bytes) after the stream: tools may complain
    # about the trailing bytes yet have written the whole output, so judge by the output.
    if not p.stdout:
        raise ExtractError(f"{argv[0]}: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout


def decompress(kind, data):
    if kind == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # stops at the end of the first member
        return d.decompress(data)
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    if kind == "lzma":
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(data)
    if kind == "bzip2":
        return bz2.BZ2Decompressor().decompress(data)
    if kind == "zstd":
        try:
            return run_tool(["zstd", "-d", "-c", "-q"], data)
        except ExtractError:
            return run_tool(["zstd", "-d", "-c", "-q"], data[:-4])
    if kind == "lz4":
        return run_tool(["lz4", "-d", "-c", "-q"], data)
    if kind == "lzo":
        return run_tool(["lzop", "-d", "-c", "-q"], data)
    raise ExtractError(f"unknown compression {kind}")


def kind_of(data):
    for kind, magic in MAGICS:
        if data.startswith(magic):
            return kind
    return None


def candidates_from_header(img):
    """The payload the setup header points at, if the header is there (boot protocol 2.08+)."""
    if len(img) < 0x250 or img[0x202:0x206] != b"HdrS":
        return []
    version = struct.unpack_from("<H", img, 0x206)[0]
    if version < 0x208:
        return []
    setup_sects = img[0x1F1] or 4
    pm_start = (setup_sects + 1) * 512
    payload_offset, payload_length = struct.unpack_from("<II", img, 0x248)
    start = pm_start + payload_offset
    if payload_length == 0 or start + payload_length > len(img):
        return []
    payload = img[start:start + payload_length]
    kind = kind_of(payload)
    return [(kind, start, payload)] if kind else []


def candidates_by_scan(img):
    """Every offset where a known magic occurs, in file order; the data is sliced lazily."""
    found = []
    for kind, magic in MAGICS:
        pos = img.find(magic)
        while pos != -1:
            found.append((kind, pos))
            pos = img.find(magic, pos + 1)
    found.sort(key=lambda c: c[1])
    for kind, pos in found:
        yield kind, pos, img[pos:]


def is_elf64_x86_64(blob):
    return (len(blob) >= 64 and blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1 and
            struct.unpack_from("<H", blob, 18)[0] == 62)


def elf_notes(blob):
    """Yields (name, type, desc) of every note in the PT_NOTE segments of an ELF64 LE file."""
    phoff = struct.unpack_from("<Q", blob, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", blob, 54)
    for i in range(phnum):
        p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from(
            "<IIQQQQ", blob, phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        off, end = p_offset, p_offset + p_filesz
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", blob, off)
            off += 12
            name = blob[off:off + namesz].rstrip(b"\0").decode(errors="replace")
            off += (namesz + 3) & ~3
            desc = blob[off:off + descsz]
            off += (descsz + 3) & ~3
            yield name, ntype, desc


def pvh_entry(blob):
    for name, ntype, desc in elf_notes(blob):
        if name == "Xen" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
            if len(desc) == 4:
                return struct.unpack("<I", desc)[0]
            if len(desc) == 8:
                return struct.unpack("<Q", desc)[0]
    return None


def extract(img):
    if img[:4] == b"\x7fELF":
        raise ExtractError("input is already an ELF file, not a bzImage")
    tried = []
    for source, cands in (("setup header", candidates_from_header(img)),
                          ("magic scan", candidates_by_scan(img))):
        for kind, offset, data in cands:
            try:
                out = decompress(kind, data)
            except (ExtractError, OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as e:
                tried.append(f"{kind}@{offset:#x}: {e}")
                continue
            if is_elf64_x86_64(out):
                return kind, offset, source, out
            tried.append(f"{kind}@{offset:#x}: decompressed to {len(out)} bytes, not an ELF64")
    detail = "; ".join(tried[:8]) or "no compressed payload found"
    raise ExtractError(f"no ELF vmlinux found in the image ({detail})")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 2 or any(f not in ("--require-pvh",) for f in flags):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, dst = args
    try:
        with open(src, "rb") as f:
            img = f.read()
        kind, offset, source, vmlinux = extract(img)
        entry = pvh_entry(vmlinux)
        if entry is None and "--require-pvh" in flags:
            raise ExtractError("the vmlinux has no XEN_ELFNOTE_PHYS32_ENTRY note "
                               "(kernel built without CONFIG_PVH): it cannot boot via PVH")
        with open(dst, "wb") as f:
            f.write(vmlinux)
    except (OSError, ExtractError) as e:
        print(f"extract_vmlinux: {src}: {e}", file=sys.stderr)
        return 1
    pvh = f"PVH entry {entry:#x}" if entry is not None else "no PVH entry note"
    print(f"extract_vmlinux: {src}: {kind} payload at {offset:#x} ({source}) -> {dst} "
          f"({len(vmlinux)} bytes, ELF64 x86-64, {pvh})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
