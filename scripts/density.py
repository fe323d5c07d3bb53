#!/usr/bin/env python3
"""Density: many idle guests of the bundled kernel on one host at once, and what each costs.

For every --pit-tick mode and every guest count (default 1, 2, 4, 8, 16, 32) it starts that many
minivmm processes together, each booting the bundled guest with `timer=pit hz=HZ ticks=HZ*SECONDS`,
so that each guest ends itself (debug-exit, status 1) once it has counted its last tick. It then
checks that every guest was exact and reports the cost:

  * exact: every guest exited through its own debug-exit after HZ*SECONDS ticks, minivmm counted
    0 lost ticks (the default `--lost-ticks delay` owes a late tick rather than dropping it), and
    the guest's run took no longer than SECONDS plus a little (a guest that had fallen behind
    would need longer to count its ticks);
  * host CPU per guest (user+sys of each minivmm from its --stats, and the whole host's busy time
    from /proc/stat, which also holds kernel workers such as the irqfd injector, less the host's
    busy rate measured for --baseline seconds just before), per guest tick;
  * syscalls per guest tick (minivmm's own count of every syscall its threads make);
  * context switches per guest tick;
  * memory beyond guest RAM per guest: the VMM's RSS, private (anonymous) and PSS (shared library
    pages split among the guests), each less the guest RAM the host backed.

Prints Markdown tables, writes the figures as TSV and, where gnuplot exists, a plot of host CPU
per guest against the number of guests (docs/reliability.md shows them).

Usage: scripts/density.py [--counts 1,2,4,8,16,32] [--seconds 30] [--hz 250]
       [--pit-tick loop,kernel] [--build build] [--out DIR] [--extra-args '...']
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# How much longer than SECONDS a guest may take to count its ticks and still be "exact": boot,
# the guest's own set-up, and process start under load. A guest that lost ticks, or was starved
# for longer than this, fails the check.
SLACK_S = 1.5


def busy_jiffies():
    """Total busy time of every host CPU so far (user+nice+system+irq+softirq+steal), in jiffies."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    v = [int(x) for x in fields]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v[:8]) - idle


def run_batch(args, count, pit_tick, workdir):
    binary = os.path.join(args.build, "vmm", "minivmm")
    kernel = os.path.join(args.build, "guest", "minivmm-guest.bin")
    ticks = args.hz * args.seconds
    procs = []
    hz_tick = os.sysconf("SC_CLK_TCK")
    # What the host spends without the guests (other work, kernel threads): measured just
    # before and subtracted pro rata, so the figure is the guests' own.
    b0 = busy_jiffies()
    time.sleep(args.baseline)
    background_per_s = (busy_jiffies() - b0) / hz_tick / args.baseline
    j0 = busy_jiffies()
    t0 = time.monotonic()
    for i in range(count):
        stats = os.path.join(workdir, f"{pit_tick}-{count}-{i}.json")
        cmd = [binary, "run", "--kernel", kernel,
               "--cmdline", f"timer=pit hz={args.hz} ticks={ticks}",
               "--pit-tick", pit_tick, "--stats", stats, "--quiet", "--no-console-input",
               # A guest that never ends on its own must not hang the benchmark.
               "--duration", str(args.seconds * 3 + 30)] + args.extra_args.split()
        err = open(os.path.join(workdir, f"{pit_tick}-{count}-{i}.err"), "w")
        procs.append((subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=err), stats, err))
    codes = [p.wait() for p, _, _ in procs]
    wall = time.monotonic() - t0
    j1 = busy_jiffies()
    for _, _, err in procs:
        err.close()

    guests = []
    for (p, stats, _), code in zip(procs, codes):
        try:
            with open(stats) as f:
                s = json.load(f)
        except (OSError, ValueError):
            s = None
        guests.append((code, s))
    return wall, max(0.0, (j1 - j0) / hz_tick - background_per_s * wall), guests


def summarize(args, count, pit_tick, wall, host_busy_s, guests):
    ticks = args.hz * args.seconds
    row = {"pit_tick": pit_tick, "guests": count, "wall_s": wall}
    problems = []
    cpu = syscalls = switches = injected_total = 0.0
    worst_run = 0.0
    mem = {"vmm_rss_kib": [], "vmm_anon_kib": [], "vmm_pss_kib": []}
    for i, (code, s) in enumerate(guests):
        if s is None:
            problems.append(f"guest {i}: exit {code}, no stats")
            continue
        injected = s["guest"]["ticks_injected"]
        lost = s["guest"]["ticks_lost"]
        run_s = s["time"]["wall_s"]
        worst_run = max(worst_run, run_s)
        if code != 1 or s["exit"]["reason"] != "guest debug-exit":
            problems.append(f"guest {i}: exit {code} ({s['exit']['reason']})")
        # The guest's own count is what ended it (status 1 after its last tick); minivmm's may be
        # one short, the edge still in doubt at exit (devices/pc/i8254/ack_audit.h).
        if injected + 1 < ticks or lost != 0:
            problems.append(f"guest {i}: {injected} ticks injected, {lost} lost")
        if run_s > args.seconds + SLACK_S:
            problems.append(f"guest {i}: took {run_s:.2f} s for {ticks} ticks")
        cpu += s["host"]["cpu_user_s"] + s["host"]["cpu_sys_s"]
        syscalls += s["syscalls"]["total"]
        switches += s["host"]["voluntary_ctx_switches"] + s["host"]["involuntary_ctx_switches"]
        injected_total += injected
        for k in mem:
            v = s["host"]["memory"].get(k)
            if v is not None:
                mem[k].append(v)
    n_ok = max(1, len(guests))
    t = max(1.0, injected_total)
    row.update({
        "exact": not problems,
        "problems": problems,
        "worst_run_s": worst_run,
        # CPU per guest per second of guest time, in ms: what one idle guest costs the host.
        "vmm_cpu_ms_per_guest_s": cpu * 1e3 / n_ok / args.seconds,
        "host_cpu_ms_per_guest_s": host_busy_s * 1e3 / n_ok / args.seconds,
        "vmm_cpu_us_per_tick": cpu * 1e6 / t,
        "host_cpu_us_per_tick": host_busy_s * 1e6 / t,
        "syscalls_per_tick": syscalls / t,
        "ctx_switches_per_tick": switches / t,
    })
    for k, vals in mem.items():
        row[k] = max(vals) if vals else None
    return row


def plot(rows, out_dir, with_host):
    if not shutil.which("gnuplot"):
        print("density: gnuplot not found, no plot", file=sys.stderr)
        return None
    modes = sorted({r["pit_tick"] for r in rows})
    data = os.path.join(out_dir, "density.dat")
    with open(data, "w") as f:
        for m in modes:
            f.write(f"# {m}\n")
            for r in rows:
                if r["pit_tick"] == m:
                    f.write(f"{r['guests']} {r['host_cpu_ms_per_guest_s']:.3f} "
                            f"{r['vmm_cpu_ms_per_guest_s']:.3f}\n")
            f.write("\n\n")
    png = os.path.join(out_dir, "density.png")
    series = []
    for i, m in enumerate(modes):
        if with_host:
            series.append(f"'{data}' index {i} using 1:2 with linespoints dashtype 2 title "
                          f"'--pit-tick {m}: whole host'")
        series.append(f"'{data}' index {i} using 1:3 with linespoints title "
                      f"'--pit-tick {m}: minivmm processes'")
    script = f"""
set terminal png size 900,560
set output '{png}'
set title 'Host CPU per idle guest (250 Hz) against guests running at once'
set xlabel 'guests'
set ylabel 'host CPU per guest, ms per second'
set logscale x 2
set yrange [0:*]
set key top left
set grid
plot {', '.join(series)}
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    return png


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="1,2,4,8,16,32")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--hz", type=int, default=250)
    ap.add_argument("--pit-tick", default="loop,kernel")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot-host", action="store_true",
                    help="also plot the whole host's CPU (meaningful only on an otherwise idle host)")
    ap.add_argument("--baseline", type=float, default=2.0,
                    help="seconds of host CPU measured without guests before each batch")
    ap.add_argument("--extra-args", default="", help="more `minivmm run` options, space separated")
    args = ap.parse_args()
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("density: needs a usable /dev/kvm")
    out_dir = args.out or tempfile.mkdtemp(prefix="minivmm-density.")
    os.makedirs(out_dir, exist_ok=True)
    counts = [int(c) for c in args.counts.split(",")]
    rows = []
    for mode in args.pit_tick.split(","):
        for n in counts:
            wall, busy, guests = run_batch(args, n, mode, out_dir)
            r = summarize(args, n, mode, wall, busy, guests)
            rows.append(r)
            print(f"density: --pit-tick {mode} x{n}: {'exact' if r['exact'] else 'NOT EXACT'}, "
                  f"{r['host_cpu_ms_per_guest_s']:.2f} ms/s host CPU per guest", file=sys.stderr)
            for p in r["problems"][:5]:
                print(f"  {p}", file=sys.stderr)

    print(f"\n{args.hz} Hz idle guests, {args.seconds} s each "
          f"({args.hz * args.seconds} ticks), all started together on {os.cpu_count()} CPUs\n")
    print("| --pit-tick | guests | exact | slowest guest | host CPU per guest | minivmm CPU per "
          "guest | host CPU per tick | syscalls per tick | ctx switches per tick | VMM RSS | "
          "VMM private | VMM PSS |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        kib = lambda k: f"{r[k] / 1024:.2f} MiB" if r[k] is not None else "n/a"
        print(f"| {r['pit_tick']} | {r['guests']} | {'yes' if r['exact'] else 'NO'} | "
              f"{r['worst_run_s']:.2f} s | {r['host_cpu_ms_per_guest_s']:.2f} ms/s | "
              f"{r['vmm_cpu_ms_per_guest_s']:.2f} ms/s | {r['host_cpu_us_per_tick']:.1f} us | "
              f"{r['syscalls_per_tick']:.2f} | {r['ctx_switches_per_tick']:.2f} | "
              f"{kib('vmm_rss_kib')} | {kib('vmm_anon_kib')} | {kib('vmm_pss_kib')} |")
    with open(os.path.join(out_dir, "density.json"), "w") as f:
        json.dump(rows, f, indent=2)
    png = plot(rows, out_dir, args.plot_host)
    print(f"\nfigures: {out_dir}/density.json" + (f", plot: {png}" if png else ""))
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
