#!/usr/bin/env python3
"""Ticks under load (issue 25): do guests get every tick, on time, on a busy host?

For every cell of guests x tick mode x host load x rate it starts the load, then that many
guests at once, each booting the bundled guest with `timer=pit hz=HZ ticks=HZ*SECONDS stamps`:
the guest stamps every tick with kvmclock and, at its last tick, prints how long its ticks took
(`stamps: ticks=N elapsed_us=E gap_min_us=A gap_max_us=B bunched=K run=R`). Per guest:

  * ticks seen against ticks owed (the guest exits at its last tick; one that never gets there
    by the deadline is short);
  * drift in ppm against the host clock at the last tick: (span - N periods) / (N periods),
    the span running from just before the guest programmed its PIT to its last tick, on
    kvmclock (the host's clock as KVM gives it to the guest). 100 ppm over 10 s is 1 ms: a
    quarter of a 250 Hz period, so a catch-up still under way at the last tick shows;
  * the largest gap between two ticks (a stall), and the longest run of bunched ticks (ticks
    less than half a period apart: a catch-up burst);
  * minivmm's own counters: lost, merged, missed by the pulse train, redelivered, fallbacks;
  * the guests' CPU demand: their VMMs' user+sys time over the wall time, as a share of the
    host's CPUs.

Tick modes: minivmm's --pit-tick kernel (the default), vcpu and loop, its --pit kvm (KVM's
in-kernel PIT), and QEMU 7.2 as the anchors: kernel-irqchip=split (QEMU's user-space PIT) and
kernel-irqchip=on (KVM's PIT). QEMU's guests boot through SeaBIOS; the stamps start at the
first tick, so firmware time does not count.

Loads (each generator runs under `timeout`, started by this script and ended by its pid):
  none, hogs (two busy loops at nice 0), compile (two gcc -O2 loops), fsync (a write+fsync loop),
  busyguest (another minivmm whose guest computes without halting: `busy`), mem (4 GiB of pages
  touched, freed and touched again).

A cell "holds" when every guest counted all its ticks with none lost and drifted at most
--max-ppm ("exact"); "short" guests had not counted their ticks when the cell's deadline
(3 x SECONDS + 30 s) ended them: QEMU's 16 and 32 guests spend most of it in SeaBIOS here. Prints a Markdown table, writes TSV and, with gnuplot, a plot of the worst drift.

Usage: scripts/load_matrix.py [--counts 1,16,32,64] [--modes kernel,vcpu,loop,kvm,qemu-split,
       qemu-kvm] [--loads none,hogs,compile,fsync,busyguest,mem] [--hz 250,1000] [--seconds 10]
       [--build build] [--out DIR] [--max-ppm 100]
Not a test: a full matrix takes hours on two CPUs. docs/timekeeping.md has the figures.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ["kernel", "vcpu", "loop", "kvm", "qemu-split", "qemu-kvm"]
LOADS = ["none", "hogs", "compile", "fsync", "busyguest", "mem"]
STAMPS = re.compile(r"stamps: ticks=(\d+) elapsed_us=(\d+) gap_min_us=(\d+) gap_max_us=(\d+) "
                    r"bunched=(\d+) run=(\d+) span_us=(\d+)")


def guest_cmd(args, mode, hz, ticks, stats):
    kernel = os.path.join(args.build, "guest", "minivmm-guest.bin")
    cmdline = f"timer=pit hz={hz} ticks={ticks} stamps"
    if mode.startswith("qemu"):
        irqchip = "split" if mode == "qemu-split" else "on"
        return ["qemu-system-x86_64", "-accel", f"kvm,kernel-irqchip={irqchip}", "-m", "64",
                "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
                "-monitor", "none", "-no-reboot",
                "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                "-kernel", kernel, "-append", cmdline]
    pit = ["--pit", "kvm"] if mode == "kvm" else ["--pit-tick", mode]
    return [os.path.join(args.build, "vmm", "minivmm"), "run", "--kernel", kernel,
            "--cmdline", cmdline, *pit, "--no-console-input", "--quiet", "--stats", stats]


def start_load(args, load, seconds, work):
    """Starts the load's processes, each bounded by `timeout`; returns their Popen objects."""
    limit = str(int(seconds + 30))
    procs = []

    def spawn(cmd):
        procs.append(subprocess.Popen(["timeout", limit, *cmd], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))

    if load == "hogs":
        for _ in range(2):
            spawn(["nice", "-n", "0", "sh", "-c", "while :; do :; done"])
    elif load == "compile":
        src = os.path.join(work, "unit.c")
        with open(src, "w") as f:
            for i in range(400):
                f.write(f"int f{i}(int x) {{ int s = 0; for (int k = 0; k < x; ++k) "
                        f"s += (k * {i}) ^ (s >> 3); return s; }}\n")
        for _ in range(2):
            spawn(["sh", "-c", f"while :; do gcc -O2 -c {src} -o /dev/null; done"])
    elif load == "fsync":
        path = os.path.join(work, "fsync.bin")
        spawn([sys.executable, "-c",
               "import os\n"
               f"fd = os.open({path!r}, os.O_WRONLY | os.O_CREAT, 0o600)\n"
               "while True:\n"
               "    os.pwrite(fd, os.urandom(65536), 0)\n"
               "    os.fsync(fd)\n"])
    elif load == "busyguest":
        spawn([os.path.join(args.build, "vmm", "minivmm"), "run", "--kernel",
               os.path.join(args.build, "guest", "minivmm-guest.bin"), "--cmdline",
               "timer=pit hz=250 ticks=0 busy", "--no-console-input", "--quiet"])
    elif load == "mem":
        spawn([sys.executable, "-c",
               "import mmap\n"
               "while True:\n"
               "    m = mmap.mmap(-1, 4 << 30)\n"
               "    for off in range(0, 4 << 30, 4096):\n"
               "        m[off] = 1\n"
               "    m.close()\n"])
    elif load != "none":
        raise SystemExit(f"load_matrix: unknown load {load}")
    return procs


def stop(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the process group this script started
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def run_cell(args, count, mode, load, hz, seconds, work):
    ticks = hz * seconds
    load_procs = start_load(args, load, seconds * 3 + 30, work)
    time.sleep(0.5 if load_procs else 0)
    guests = []
    t0 = time.monotonic()
    for i in range(count):
        stats = os.path.join(work, f"s{i}.json")
        out = open(os.path.join(work, f"o{i}.txt"), "w")
        if os.path.exists(stats):
            os.unlink(stats)
        cmd = guest_cmd(args, mode, hz, ticks, stats)
        p = subprocess.Popen(["timeout", str(seconds * 3 + 30), *cmd], stdout=out,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        guests.append((p, out, stats, os.path.join(work, f"o{i}.txt")))
    for p, out, _, _ in guests:
        p.wait()
        out.close()
    wall = time.monotonic() - t0
    stop(load_procs)

    rows = []
    cpu_s = 0.0
    for i, (p, _, stats, out_path) in enumerate(guests):
        text = open(out_path, errors="replace").read()
        m = STAMPS.search(text)
        g = {"guest": i, "exit": p.returncode, "ticks": 0, "drift_ppm": None, "gap_ms": None,
             "run": None, "lost": None, "merged": None, "missed": None, "redelivered": None,
             "fallbacks": None}
        if m:
            n, _, _, gap_max_us, _, run, span_us = (int(x) for x in m.groups())
            # The span runs from just before the guest programmed its timer to its last tick:
            # n periods on time.
            expected_us = n * 1e6 / hz
            g.update(ticks=n, drift_ppm=(span_us - expected_us) / expected_us * 1e6,
                     gap_ms=gap_max_us / 1000, run=run)
        if os.path.exists(stats):
            try:
                s = json.load(open(stats))
                pit = s["devices"].get("pit") or {}
                g.update(lost=s["guest"].get("ticks_lost"), merged=pit.get("ticks_merged"),
                         missed=pit.get("ticks_missed"), redelivered=pit.get("ticks_redelivered"),
                         fallbacks=pit.get("train_fallbacks"))
                cpu_s += s["host"]["cpu_user_s"] + s["host"]["cpu_sys_s"]
            except (ValueError, KeyError):
                pass
        rows.append(g)
    exact = [g for g in rows if g["ticks"] == ticks and (g["lost"] or 0) == 0 and
             g["drift_ppm"] is not None and abs(g["drift_ppm"]) <= args.max_ppm]
    drifts = [g["drift_ppm"] for g in rows if g["drift_ppm"] is not None]
    gaps = [g["gap_ms"] for g in rows if g["gap_ms"] is not None]
    runs = [g["run"] for g in rows if g["run"] is not None]

    def total(key):
        vals = [g[key] for g in rows if g[key] is not None]
        return sum(vals) if vals else None

    return {"guests": count, "mode": mode, "load": load, "hz": hz, "seconds": seconds,
            "exact": len(exact), "short": sum(1 for g in rows if g["ticks"] < ticks),
            "worst_drift_ppm": max(drifts, key=abs) if drifts else None,
            "worst_gap_ms": max(gaps) if gaps else None, "max_run": max(runs) if runs else None,
            "lost": total("lost"), "merged": total("merged"), "missed": total("missed"),
            "redelivered": total("redelivered"), "fallbacks": total("fallbacks"),
            "cpu_demand_pct": (cpu_s / wall / os.cpu_count() * 100) if cpu_s else None,
            "wall_s": wall, "per_guest": rows}


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def print_table(cells, out):
    head = ("| guests | mode | load | Hz | exact | short | worst drift (ppm) | worst gap (ms) | "
            "longest burst | lost | merged | missed | redelivered | fallbacks | "
            "VMM CPU (% of host) |")
    lines = [head, "|---" * 15 + "|"]
    for c in cells:
        lines.append(
            f"| {c['guests']} | {c['mode']} | {c['load']} | {c['hz']} | "
            f"{c['exact']}/{c['guests']} | {c['short']} | {fmt(c['worst_drift_ppm'])} | "
            f"{fmt(c['worst_gap_ms'])} | {fmt(c['max_run'])} | {fmt(c['lost'])} | "
            f"{fmt(c['merged'])} | {fmt(c['missed'])} | {fmt(c['redelivered'])} | "
            f"{fmt(c['fallbacks'])} | {fmt(c['cpu_demand_pct'], '{:.1f}')} |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "load_matrix.md"), "w") as f:
        f.write(text + "\n")


def plot(cells, out):
    if not shutil.which("gnuplot"):
        print("load_matrix: gnuplot not found, no plot", file=sys.stderr)
        return
    loads = sorted({c["load"] for c in cells})
    modes = [m for m in MODES if any(c["mode"] == m for c in cells)]
    for load in loads:
        data = os.path.join(out, f"drift_{load}.dat")
        with open(data, "w") as f:
            for m in modes:
                f.write(f"# {m}\n")
                for c in cells:
                    if c["mode"] == m and c["load"] == load and c["worst_drift_ppm"] is not None:
                        f.write(f"{c['guests']} {abs(c['worst_drift_ppm']) + 1:.1f}\n")
                f.write("\n\n")
        series = ", ".join(f"'{data}' index {i} using 1:2 with linespoints title '{m}'"
                           for i, m in enumerate(modes))
        png = os.path.join(out, f"drift_{load}.png")
        subprocess.run(["gnuplot"], text=True, check=True, input=f"""
set terminal png size 900,560
set output '{png}'
set title 'Worst guest drift at its last tick, load: {load}'
set xlabel 'guests at once'
set ylabel '|drift| + 1, ppm (log)'
set logscale xy
set key top left
set grid
plot {series}
""")
        print(f"load_matrix: plot {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="1,16,32,64")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--hz", default="250,1000")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--max-ppm", type=float, default=100.0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--table-from", default=None,
                    help="print the table and plots of an earlier run's load_matrix.json")
    args = ap.parse_args()
    if args.table_from:
        cells = json.load(open(args.table_from))
        out = args.out or os.path.dirname(os.path.abspath(args.table_from))
        print_table(cells, out)
        plot(cells, out)
        return
    out = args.out or tempfile.mkdtemp(prefix="load_matrix.")
    os.makedirs(out, exist_ok=True)
    modes = args.modes.split(",")
    if any(m.startswith("qemu") for m in modes) and not shutil.which("qemu-system-x86_64"):
        print("load_matrix: no qemu-system-x86_64 (apt install qemu-system-x86); skipping QEMU",
              file=sys.stderr)
        modes = [m for m in modes if not m.startswith("qemu")]
    cells = []
    with tempfile.TemporaryDirectory(prefix="load_matrix.") as work:
        for hz in (int(h) for h in args.hz.split(",")):
            for load in args.loads.split(","):
                for count in (int(n) for n in args.counts.split(",")):
                    for mode in modes:
                        c = run_cell(args, count, mode, load, hz, args.seconds, work)
                        cells.append(c)
                        print(f"load_matrix: {count} x {mode}, load {load}, {hz} Hz: "
                              f"{c['exact']}/{count} exact, worst drift "
                              f"{fmt(c['worst_drift_ppm'])} ppm, gap "
                              f"{fmt(c['worst_gap_ms'])} ms, wall {c['wall_s']:.1f} s",
                              file=sys.stderr, flush=True)
    with open(os.path.join(out, "load_matrix.json"), "w") as f:
        json.dump(cells, f, indent=1)
    print_table(cells, out)
    plot(cells, out)
    print(f"load_matrix: results in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
