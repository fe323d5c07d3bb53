#!/usr/bin/env python3
"""`minivmm exec` beside QEMU 7.2 (issue 32): the time from starting the VMM's process to its
exit, for one command booted in the same kernel with the same share, in the same run.

Commands (each run in the share, which is also the working folder):
  * true                         the boot and teardown alone;
  * find . -type f | wc -l       a tree of --files files (default 10,000) made by this script;
  * git status --short           a small repository (--git-files files, one commit) made by it.

The two VMMs boot the SAME initramfs with the SAME init (guest/exec_init): the one minivmm built
and cached in ~/.cache/minivmm/exec/ (a warm-up `minivmm exec true` makes sure it is there), plus
the run's spec archive (/exec.spec: command, environment, folder, 9p tags, consoles), which this
script writes as minivmm does (vmm/exec/exec_spec.cc). The init mounts tag `minivmm-root` (the
host's /, read-only) and `minivmm-share0` (the share), writes the command's output to /dev/hvc0
and /dev/hvc1 and its status to isa-debug-exit at 0xf4. QEMU gets, per --qemu-machine:
  * pc (default, what the issue names): `-M pc -accel kvm -kernel K -initrd I -virtfs ...` (virtio
    PCI), `-device isa-debug-exit,iobase=0xf4,iosize=4`, `-device virtio-serial-pci` with two
    virtconsoles. Debian 6.1 builds virtio_pci as a module and minivmm's initramfs has only
    virtio_mmio, so a third archive is appended for QEMU: virtio_pci and its two helpers
    (virtio_pci_legacy_dev, virtio_pci_modern_dev) from the same --modules folder, and a
    /modules.list that loads them after virtio.ko. The init itself is unchanged; the kernel
    line drops `pci=off`.
  * microvm: `-M microvm` (virtio-mmio announced in the ACPI DSDT, as minivmm does), the
    initramfs byte for byte minivmm's, `-device virtio-9p-device` / `virtio-serial-device`.
QEMU's status is (word << 1) | 1 truncated to 8 bits: 1 for a command that exited 0.

Rounds alternate the VMMs (minivmm, QEMU, minivmm, ...) for each command. Reported: the median
per VMM and command, and the ratio minivmm / QEMU (below 1: minivmm faster).

On a host whose KVM cannot boot Linux this runs under scripts/nested_kvm.sh, where every time is
QEMU TCG's emulation of the L1 kernel running both VMMs on nested KVM: absolute times there say
nothing about a real host; only the ratio inside one run means anything.

  scripts/nested_kvm.sh -- python3 scripts/bench_exec.py --minivmm build/vmm/minivmm \\
      --kernel K --modules M --rounds 1 --workdir DIR --out /work/out/bench_exec
Writes OUT.json and, if gnuplot is installed, OUT.png.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MARKER = 0xE0000


def newc(entries):
    """A newc cpio of (name, mode, data) entries, with its trailer."""
    out = bytearray()
    ino = 1
    for name, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join("%08X" % v for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        out += hdr.encode() + nb
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
        ino += 1
    return bytes(out)


def read_newc(data, want):
    """The contents of file `want` in a newc archive, or None."""
    at = 0
    while at + 110 <= len(data):
        h = data[at:at + 110]
        fs, ns = int(h[54:62], 16), int(h[94:102], 16)
        name = data[at + 110:at + 110 + ns - 1].decode()
        body = (at + 110 + ns + 3) & ~3
        if name == "TRAILER!!!":
            return None
        if name == want:
            return data[body:body + fs]
        at = (body + fs + 3) & ~3
    return None


def exec_env():
    """The environment minivmm passes (vmm/exec/exec_spec.cc exec_environment)."""
    keep = {"PATH", "HOME", "USER", "LOGNAME", "TERM", "LANG", "LANGUAGE", "TZ"}
    env = ["%s=%s" % (k, v) for k, v in os.environ.items() if k in keep or k.startswith("LC_")]
    if "PATH" not in os.environ:
        env.append("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env.append("MINIVMM_EXEC=1")
    return env


def spec_bytes(argv, cwd, share):
    parts = []
    for a in argv:
        parts += ["arg", a]
    for e in exec_env():
        parts += ["env", e]
    parts += ["cwd", cwd, "root", "minivmm-root", "stdout", "/dev/hvc0", "stderr", "/dev/hvc1",
              "share", "minivmm-share0", share, "rw"]
    return b"".join(p.encode() + b"\0" for p in parts)


def make_tree(share, files, git_files):
    tree = os.path.join(share, "tree")
    os.makedirs(tree)
    per = 100
    for d in range((files + per - 1) // per):
        dd = os.path.join(tree, "d%03d" % d)
        os.mkdir(dd)
        for f in range(min(per, files - d * per)):
            with open(os.path.join(dd, "f%03d" % f), "w") as fh:
                fh.write("x\n")
    repo = os.path.join(share, "repo")
    os.makedirs(repo)
    for i in range(git_files):
        with open(os.path.join(repo, "file%03d.txt" % i), "w") as fh:
            fh.write("line %d\n" % i)
    git = ["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "bench"], check=True)
    with open(os.path.join(repo, "file000.txt"), "a") as fh:  # one change for status to find
        fh.write("changed\n")
    return tree, repo


def timed(cmd, cwd, timeout):
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return time.monotonic() - t0, p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minivmm", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--modules", required=True)
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--qemu-machine", choices=["pc", "microvm"], default="pc")
    ap.add_argument("--qemu-cpu", default="host")
    ap.add_argument("--only", default=None, help="run only the commands whose label starts so")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--git-files", type=int, default=100)
    ap.add_argument("--memory", default="512M")
    ap.add_argument("--workdir", default=".", help="where the share is made (default: here)")
    ap.add_argument("--timeout", type=float, default=300, help="per boot, seconds (nested: 30-70 s each)")
    ap.add_argument("--out", default="bench_exec")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench_exec.", dir=a.workdir)
    share = os.path.join(work, "share")
    os.mkdir(share)
    t0 = time.monotonic()
    tree, repo = make_tree(share, a.files, a.git_files)
    print("tree of %d files and a %d-file repository made in %.1f s under %s" %
          (a.files, a.git_files, time.monotonic() - t0, share), flush=True)

    mv = [os.path.abspath(a.minivmm), "exec", "--kernel", a.kernel, "--modules", a.modules,
          "--memory", a.memory, "--share", share, "--"]
    dt, p = timed(mv + ["true"], share, a.timeout)
    print("warm-up minivmm exec true: %.2f s, exit %d" % (dt, p.returncode), flush=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode(errors="replace"))
        return 1
    release = os.path.basename(a.modules.rstrip("/"))
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                         "minivmm", "exec")
    cpios = sorted(glob.glob(os.path.join(cache, release + "-*.cpio")), key=os.path.getmtime)
    if not cpios:
        print("no cached initramfs for %s in %s" % (release, cache))
        return 1
    base = open(cpios[-1], "rb").read()
    print("initramfs: %s (%d bytes)" % (cpios[-1], len(base)), flush=True)

    extra = b""
    if a.qemu_machine == "pc":
        mods = base_list = read_newc(base, "modules.list").decode().split("\n")
        pci = ["virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci"]
        entries, added = [], []
        for m in pci:
            rel = "kernel/drivers/virtio/%s.ko" % m
            entries.append(("modules/" + rel, 0o100644, open(os.path.join(a.modules, rel), "rb").read()))
            added.append("/modules/" + rel)
        at = next(i for i, l in enumerate(base_list) if l.endswith("/virtio.ko")) + 1
        mods = base_list[:at] + added + base_list[at:]
        entries.append(("modules.list", 0o100644, "\n".join(mods).encode()))
        extra = newc(entries)

    def qemu_cmd(argv, run_dir):
        initrd = os.path.join(run_dir, "initrd")
        with open(initrd, "wb") as fh:
            fh.write(base + extra + newc([("exec.spec", 0o100644, spec_bytes(argv, share, share))]))
        line = "console=ttyS0 panic=-1 rdinit=/init random.trust_cpu=on tsc=reliable quiet"
        c = [a.qemu, "-accel", "kvm", "-cpu", a.qemu_cpu, "-m", a.memory, "-smp", "1",
             "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
             "-kernel", a.kernel, "-initrd", initrd, "-append", line,
             "-serial", "file:" + os.path.join(run_dir, "console"),
             "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
             "-chardev", "file,id=out,path=" + os.path.join(run_dir, "out"),
             "-chardev", "file,id=err,path=" + os.path.join(run_dir, "err")]
        if a.qemu_machine == "pc":
            c += ["-M", "pc",
                 "-virtfs", "local,path=/,mount_tag=minivmm-root,security_model=none,readonly=on,multidevs=remap",
                 "-virtfs", "local,path=%s,mount_tag=minivmm-share0,security_model=none" % share,
                 "-device", "virtio-serial-pci"]
        else:
            c += ["-M", "microvm",
                  "-fsdev", "local,id=r,path=/,security_model=none,readonly=on,multidevs=remap",
                  "-device", "virtio-9p-device,fsdev=r,mount_tag=minivmm-root",
                  "-fsdev", "local,id=s0,path=%s,security_model=none" % share,
                  "-device", "virtio-9p-device,fsdev=s0,mount_tag=minivmm-share0",
                  "-device", "virtio-serial-device"]
        c += ["-device", "virtconsole,chardev=out", "-device", "virtconsole,chardev=err"]
        return c

    commands = [("true", ["true"], None),
                ("find %d files" % a.files, ["sh", "-c", "find tree -type f | wc -l"], str(a.files)),
                ("git status", ["git", "-c", "safe.directory=*", "-C", "repo", "status", "--short"], "M file000.txt")]
    if a.only:
        commands = [c for c in commands if c[0].startswith(a.only)]
    results = {"minivmm": {}, "qemu": {}}
    notes = []
    qemu_ok = True
    for label, argv, expect in commands:
        for vmm in ("minivmm", "qemu"):
            results[vmm][label] = []
        for r in range(a.rounds):
            for vmm in ("minivmm", "qemu"):
                if vmm == "qemu" and not qemu_ok:
                    continue
                run_dir = tempfile.mkdtemp(dir=work)
                if vmm == "minivmm":
                    dt, p = timed(mv + argv, share, a.timeout)
                    out, ok = p.stdout.decode(errors="replace"), p.returncode == 0
                    err = p.stderr.decode(errors="replace")
                else:
                    dt, p = timed(qemu_cmd(argv, run_dir), share, a.timeout)
                    out = open(os.path.join(run_dir, "out"), errors="replace").read() \
                        if os.path.exists(os.path.join(run_dir, "out")) else ""
                    err = open(os.path.join(run_dir, "err"), errors="replace").read() \
                        if os.path.exists(os.path.join(run_dir, "err")) else ""
                    ok = p.returncode == (((MARKER | 0x100) << 1) | 1) & 0xff
                if ok and expect is not None and expect not in out:
                    ok = False
                print("  %-8s %-18s round %d: %7.2f s exit %d %s" %
                      (vmm, label, r + 1, dt, p.returncode, "ok" if ok else "INVALID"), flush=True)
                if not ok:
                    why = "%s %s exit %d; stdout %r; stderr %r" % (vmm, label, p.returncode,
                                                                  out[-300:], err[-600:])
                    if vmm == "qemu":
                        con = os.path.join(run_dir, "console")
                        if os.path.exists(con):
                            why += "; console tail %r" % open(con, errors="replace").read()[-1200:]
                        qemu_ok = False
                    print("    " + why, flush=True)
                    notes.append(why)
                    continue
                results[vmm][label].append(dt)

    rows = []
    print("\n%-18s %12s %12s %10s" % ("command", "minivmm s", "QEMU s", "ratio"))
    for label, _, _ in commands:
        m = results["minivmm"][label]
        q = results["qemu"][label]
        mm = statistics.median(m) if m else None
        qm = statistics.median(q) if q else None
        ratio = mm / qm if mm and qm else None
        rows.append({"command": label, "minivmm_s": m, "qemu_s": q, "minivmm_median_s": mm,
                     "qemu_median_s": qm, "ratio": ratio})
        f = lambda v, fmt: fmt % v if v is not None else "-"
        print("%-18s %12s %12s %10s" % (label, f(mm, "%.2f"), f(qm, "%.2f"), f(ratio, "%.2f")))
    nested = os.environ.get("MINIVMM_NESTED_KVM") == "1"
    doc = {"rounds": a.rounds, "files": a.files, "git_files": a.git_files,
           "qemu_machine": a.qemu_machine, "qemu_cpu": a.qemu_cpu, "memory": a.memory, "kernel": a.kernel,
           "initramfs": cpios[-1], "nested_kvm": nested, "rows": rows, "notes": notes,
           "qemu_version": subprocess.run([a.qemu, "--version"], stdout=subprocess.PIPE,
                                          text=True).stdout.split("\n")[0]}
    if nested:
        print("(nested KVM under QEMU TCG: absolute times mean nothing, only the ratio)")
    with open(a.out + ".json", "w") as fh:
        json.dump(doc, fh, indent=1)
    if shutil.which("gnuplot") and all(r["minivmm_median_s"] for r in rows):
        dat = a.out + ".dat"
        with open(dat, "w") as fh:
            for r in rows:
                fh.write('"%s" %f %f\n' % (r["command"], r["minivmm_median_s"],
                                           r["qemu_median_s"] or 0))
        subprocess.run(["gnuplot", "-e",
                        "set terminal png size 800,480; set output '%s.png'; set style data histograms;"
                        "set style fill solid; set ylabel 'seconds to exit (median)';"
                        "set title 'minivmm exec vs QEMU 7.2 (%s)';"
                        "plot '%s' using 2:xtic(1) title 'minivmm', '' using 3 title 'QEMU'" %
                        (a.out, "nested KVM: only the ratio counts" if nested else "", dat)],
                       check=False)
        os.unlink(dat)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
