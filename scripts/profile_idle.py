#!/usr/bin/env python3
"""Profiles an idle guest: what each host-alarm backend (and KVM's in-kernel PIT, and QEMU)
costs the host per guest tick, measured side by side in one run.

For every configuration it boots the bundled guest idle (timer=pit hz=HZ ticks=0), waits until
the guest has printed its banner (so boot and firmware time are excluded), then measures a
steady-state window of SECONDS with

  * perf stat --per-thread -a: raw_syscalls:sys_enter (every syscall of every thread of the
    VMM, untraced), context-switches and task-clock (host CPU of the VMM's threads), plus the
    task-clock of the kernel workers that inject interrupts for it (the irqfd kworker, KVM's
    kvm-pit thread), and
  * strace -c -f -p PID over a second window of the same length (strace slows each syscall,
    so its counts are higher; it gives the per-syscall table).

Guest ticks in a window are HZ * SECONDS; for minivmm's own PIT the VMM's --stats JSON gives
the exact count, lost ticks, clock reads and its own syscall counts. Prints Markdown.

Context switches are also read per thread from /proc/PID/task/*/status around the perf window,
voluntary (the thread blocked) and involuntary (it was preempted) apart, grouped by thread name
(minivmm: the loop is the main thread "minivmm", then "vcpu0", "signals"; QEMU: its own names).

--matrix measures every --pit-tick x --alarm x --poll combination instead of the short list;
--affinity adds, for the default delivery, runs pinned with --cpu-affinity (loop and vCPU on
different CPUs, and on the same one).

Usage: scripts/profile_idle.py [--hz 250] [--seconds 10] [--no-qemu] [--no-strace]
       [--build build] [--configs NAME,...] [--matrix] [--affinity]
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


def minivmm_cmd(build, hz, pit, alarm, poll, stats):
    return [os.path.join(build, "vmm", "minivmm"), "run",
            "--kernel", os.path.join(build, "guest", "minivmm-guest.bin"),
            "--cmdline", f"timer=pit hz={hz} ticks=0", "--pit", pit, "--alarm", alarm,
            "--poll", poll, "--stats", stats, "--quiet", "--no-console-input"]


def qemu_cmd(build, hz, irqchip):
    return ["qemu-system-x86_64", "-accel", f"kvm,kernel-irqchip={irqchip}", "-m", "64",
            "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
            "-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
            "-kernel", os.path.join(build, "guest", "minivmm-guest.bin"),
            "-append", f"timer=pit hz={hz} ticks=0"]


PIT_TICKS = ["loop", "vcpu", "kernel"]
ALARMS = ["ppoll", "timerfd", "dynticks", "periodic"]
POLLS = ["ppoll", "epoll", "timerfd-epoll", "auto"]


def matrix_configs(build, hz, tmp):
    out = []
    for tick in PIT_TICKS:
        for alarm in ALARMS:
            for poll in POLLS:
                name = f"minivmm pit-tick={tick} alarm={alarm} poll={poll}"
                stats = os.path.join(tmp, f"m-{tick}-{alarm}-{poll}.json")
                out.append((name, minivmm_cmd(build, hz, "user", alarm, poll, stats)
                            + ["--pit-tick", tick], stats))
    return out


def affinity_configs(build, hz, tmp):
    out = []
    for label, spec in [("apart", "loop=0,vcpu=1"), ("together", "loop=0,vcpu=0")]:
        stats = os.path.join(tmp, f"aff-{label}.json")
        out.append((f"minivmm defaults cpu-affinity={spec}",
                    minivmm_cmd(build, hz, "user", "ppoll", "epoll", stats)
                    + ["--cpu-affinity", spec], stats))
    return out


def configs(build, hz, tmp):
    out = []
    for alarm, poll in [("ppoll", "ppoll"), ("ppoll", "epoll"), ("timerfd", "epoll"),
                        ("dynticks", "epoll"), ("periodic", "epoll")]:
        name = f"minivmm pit=user alarm={alarm} poll={poll}"
        stats = os.path.join(tmp, f"{alarm}-{poll}.json")
        # The loop delivering: the alarm backends differ only there (--pit-tick kernel has
        # been the default since 2026-12-01, and is measured on its own below).
        out.append((name, minivmm_cmd(build, hz, "user", alarm, poll, stats)
                    + ["--pit-tick", "loop"], stats))
    stats = os.path.join(tmp, "ioctl.json")
    out.append(("minivmm pit=user alarm=ppoll poll=ppoll irq=ioctl",
                minivmm_cmd(build, hz, "user", "ppoll", "ppoll", stats)
                + ["--irq-inject", "ioctl", "--pit-tick", "loop"],
                stats))
    for inject in ["ioctl", "irqfd"]:
        stats = os.path.join(tmp, f"vcpu-{inject}.json")
        out.append((f"minivmm pit=user pit-tick=vcpu irq={inject}",
                    minivmm_cmd(build, hz, "user", "ppoll", "epoll", stats)
                    + ["--pit-tick", "vcpu", "--irq-inject", inject], stats))
    stats = os.path.join(tmp, "kernel.json")
    out.append(("minivmm pit=user pit-tick=kernel",
                minivmm_cmd(build, hz, "user", "ppoll", "epoll", stats) + ["--pit-tick", "kernel"],
                stats))
    # Issue 14: the same idle guest with a virtio-blk disk and the virtio console present must
    # cost what it costs without them (the devices sit idle: no notifies, no wakeups).
    disk = os.path.join(tmp, "idle-disk.img")
    with open(disk, "wb") as f:
        f.truncate(1 << 20)
    stats = os.path.join(tmp, "devices.json")
    out.append(("minivmm pit=user alarm=ppoll poll=epoll +virtio-blk +virtio-console",
                minivmm_cmd(build, hz, "user", "ppoll", "epoll", stats)
                + ["--pit-tick", "loop", "--drive", disk, "--console", "virtio"], stats))
    stats = os.path.join(tmp, "devices-kernel.json")
    out.append(("minivmm pit=user pit-tick=kernel +virtio-blk +virtio-console",
                minivmm_cmd(build, hz, "user", "ppoll", "epoll", stats)
                + ["--pit-tick", "kernel", "--drive", disk, "--console", "virtio"], stats))
    stats = os.path.join(tmp, "kvm.json")
    out.append(("minivmm pit=kvm", minivmm_cmd(build, hz, "kvm", "ppoll", "ppoll", stats), stats))
    out.append(("qemu kernel-irqchip=split (user PIT)", qemu_cmd(build, hz, "split"), None))
    out.append(("qemu kernel-irqchip=on (KVM PIT)", qemu_cmd(build, hz, "on"), None))
    return out


def wait_for_banner(path, proc, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"exited early with {proc.returncode}")
        try:
            with open(path, "rb") as f:
                if b"minivmm-guest:" in f.read():
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError("guest banner never appeared")


# Kernel threads that do a VMM's interrupt injection outside its process: the irqfd worker
# (a kworker) for minivmm's irqfd deliveries, kvm-pit for KVM's in-kernel PIT.
KERNEL_WORKERS = ("kworker", "kvm-pit")


def thread_switches(pid):
    """{tid: (name, voluntary, involuntary)} for every thread of `pid` now."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            out[int(tid)] = (fields["Name"].strip(), int(fields["voluntary_ctxt_switches"]),
                             int(fields["nonvoluntary_ctxt_switches"]))
        except (OSError, KeyError, ValueError):
            pass  # the thread exited meanwhile
    return out


def switch_deltas(before, after):
    """Per thread name: [voluntary, involuntary] over the window (threads alive at both ends)."""
    out = {}
    for tid, (name, vol, invol) in after.items():
        if tid in before:
            d = out.setdefault(name, [0, 0])
            d[0] += vol - before[tid][1]
            d[1] += invol - before[tid][2]
    return out


def perf_window(pid, seconds):
    """Counts over `seconds` for every thread of the host (perf stat --per-thread -a), summed
    over the process's threads; task-clock is also summed over the kernel workers, which
    inject interrupts on a VMM's behalf and would otherwise be nobody's cost."""
    tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    res = subprocess.run(["perf", "stat", "--per-thread", "-a", "-x", ",", "-e",
                          "raw_syscalls:sys_enter,context-switches,task-clock",
                          "--", "sleep", str(seconds)], capture_output=True, text=True)
    vals = {}
    workers = 0.0
    for line in res.stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 4 or "-" not in parts[0]:
            continue
        comm, _, tid = parts[0].rpartition("-")
        try:
            value = float(parts[1])
            tid = int(tid)
        except ValueError:
            continue
        if tid in tids:
            vals[parts[3]] = vals.get(parts[3], 0.0) + value
        elif parts[3] == "task-clock" and comm.startswith(KERNEL_WORKERS):
            workers += value
    vals["workers-task-clock"] = workers
    return vals


def strace_window(pid, seconds):
    proc = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    table = {}
    for line in err.splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if m and m.group(2) != "total":
            table[m.group(2)] = int(m.group(1))
    return table


def measure(name, cmd, stats, hz, seconds, do_strace, tmp):
    out_path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".out")
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for_banner(out_path, proc)
        time.sleep(0.3)  # let the guest program its timer
        before = thread_switches(proc.pid)
        perf = perf_window(proc.pid, seconds)
        switches = switch_deltas(before, thread_switches(proc.pid))
        st = strace_window(proc.pid, seconds) if do_strace else {}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    report = None
    if stats and os.path.exists(stats):
        with open(stats) as f:
            report = json.load(f)
    ticks = hz * seconds
    return {"name": name, "perf": perf, "strace": st, "ticks": ticks, "report": report,
            "switches": switches}


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hz", type=int, default=250)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-qemu", action="store_true")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--configs", default="", help="comma-separated substrings to select")
    ap.add_argument("--matrix", action="store_true",
                    help="every --pit-tick x --alarm x --poll combination (long: 48 configs)")
    ap.add_argument("--affinity", action="store_true",
                    help="add the default delivery pinned with --cpu-affinity")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds over all configurations; CPU and context switches are medians "
                         "(this host is a noisy VM: compare ratios within one run)")
    args = ap.parse_args()

    if args.hz < 19 or args.hz > 10000 or args.seconds < 1 or args.seconds > 3600:
        sys.exit("profile_idle: --hz must be 19..10000 and --seconds 1..3600")
    for tool in ["perf", "strace"]:
        if not shutil.which(tool):
            sys.exit(f"profile_idle: {tool} not found (scripts/setup.sh installs it)")
    have_qemu = shutil.which("qemu-system-x86_64") is not None
    if not args.no_qemu and not have_qemu:
        print("profile_idle: qemu-system-x86_64 not found; install qemu-system-x86 for the "
              "QEMU columns (skipping them)", file=sys.stderr)

    tmp = tempfile.mkdtemp(prefix="minivmm-profile-")
    all_configs = configs(args.build, args.hz, tmp)
    if args.matrix:
        all_configs = matrix_configs(args.build, args.hz, tmp) + [
            c for c in all_configs if not c[0].startswith("minivmm pit=user")]
    if args.affinity:
        all_configs += affinity_configs(args.build, args.hz, tmp)
    selected = [c for c in all_configs
                if not (c[0].startswith("qemu") and (args.no_qemu or not have_qemu))
                and (not args.configs or any(s in c[0] for s in args.configs.split(",")))]
    # Rounds interleave the configurations, so a slow patch of the host hits all of them alike.
    runs = {name: [] for name, _, _ in selected}
    for rnd in range(max(1, args.repeat)):
        for name, cmd, stats in selected:
            print(f"profile_idle: round {rnd + 1}: {name} ...", file=sys.stderr)
            runs[name].append(measure(name, cmd, stats, args.hz, args.seconds,
                                      not args.no_strace and rnd == 0, tmp))
    rows = []
    for name, _, _ in selected:
        rs = runs[name]
        med = {}
        for key in ["raw_syscalls:sys_enter", "context-switches", "task-clock",
                    "workers-task-clock"]:
            vals = sorted(r["perf"][key] for r in rs if key in r["perf"])
            if vals:
                med[key] = vals[len(vals) // 2]
        # Median per thread name and kind over the rounds.
        names = sorted({n for r in rs for n in r["switches"]})
        switches = {}
        for n in names:
            vols = sorted(r["switches"].get(n, [0, 0])[0] for r in rs)
            invols = sorted(r["switches"].get(n, [0, 0])[1] for r in rs)
            switches[n] = (vols[len(vols) // 2], invols[len(invols) // 2])
        rows.append({"name": name, "perf": med, "strace": rs[0]["strace"], "switches": switches,
                     "ticks": rs[0]["ticks"], "report": rs[-1]["report"],
                     "cpu_all": [r["perf"].get("task-clock", 0) * 1000 / r["ticks"] for r in rs],
                     "cpu_workers_all": [(r["perf"].get("task-clock", 0) +
                                          r["perf"].get("workers-task-clock", 0)) * 1000 / r["ticks"]
                                         for r in rs]})

    print(f"## Idle guest at {args.hz} Hz, {args.seconds} s steady-state window, "
          f"median of {max(1, args.repeat)} interleaved rounds\n")
    print("Per guest tick (ticks = Hz x seconds). Syscalls: perf raw_syscalls:sys_enter, all "
          "threads, untraced; strace: the same under `strace -c -f`.\n")
    print("| configuration | syscalls/tick | strace syscalls/tick | timer_settime+timerfd_settime/tick "
          "| timer_gettime | ctx switches/tick | CPU us/tick | + kernel workers us/tick |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["ticks"]
        p = r["perf"]
        st = r["strace"]
        sys_t = p.get("raw_syscalls:sys_enter")
        cs = p.get("context-switches")
        cpu_ms = p.get("task-clock")
        workers_ms = p.get("workers-task-clock")
        st_total = sum(st.values()) if st else None
        settime = (st.get("timer_settime", 0) + st.get("timerfd_settime", 0)) if st else None
        print(f"| {r['name']} | {fmt(sys_t / t if sys_t is not None else None)} | "
              f"{fmt(st_total / t if st_total else None)} | "
              f"{fmt(settime / t if settime is not None else None, 3)} | "
              f"{st.get('timer_gettime', 0) if st else '-'} | "
              f"{fmt(cs / t if cs is not None else None)} | "
              f"{fmt(cpu_ms * 1000 / t if cpu_ms is not None else None, 1)} | "
              f"{fmt(workers_ms * 1000 / t if workers_ms is not None else None, 1)} |")

    print("\n### Context switches per tick by thread, voluntary / involuntary "
          "(/proc/PID/task/*/status over the perf window, median)\n")
    print("| configuration | all threads vol / invol | by thread |")
    print("|---|---|---|")
    for r in rows:
        t = r["ticks"]
        sw = r["switches"]
        vol = sum(v for v, _ in sw.values())
        invol = sum(i for _, i in sw.values())
        parts = ", ".join(f"{n} {v / t:.2f} / {i / t:.2f}" for n, (v, i) in sorted(sw.items())
                          if v or i)
        print(f"| {r['name']} | {vol / t:.2f} / {invol / t:.2f} | {parts} |")

    qemu_split = next((r for r in rows if "split" in r["name"]), None)
    if qemu_split and qemu_split["perf"].get("task-clock"):
        base = qemu_split["perf"]["task-clock"]
        print("\nCPU per tick relative to QEMU split in the same run (median; every round: "
              "us/tick):\n")
        for r in rows:
            c = r["perf"].get("task-clock")
            if c:
                rounds = ", ".join(f"{v:.0f}" for v in r["cpu_all"])
                print(f"- {r['name']}: {c / base:.2f} x ({rounds})")
        print("\nThe same with the kernel workers' CPU added to each (median of the per-round sums "
              "relative to QEMU split's):\n")
        split_all = sorted(qemu_split["cpu_workers_all"])[len(qemu_split["cpu_workers_all"]) // 2]
        for r in rows:
            vals = sorted(r["cpu_workers_all"])
            if vals and vals[len(vals) // 2] > 0:
                med = vals[len(vals) // 2]
                rounds = ", ".join(f"{v:.0f}" for v in r["cpu_workers_all"])
                print(f"- {r['name']}: {med / split_all:.2f} x ({rounds})")

    print("\n### minivmm's own counters (last round, whole run, from --stats)\n")
    print("The timer columns add the loop's Dynticks and, with --pit-tick vcpu, the vCPU "
          "thread's; with --pit-tick kernel the loop's passes are the refills.\n")
    print("| configuration | ticks injected | lost | hz measured | syscalls/tick (loop + vCPU) | "
          "clock reads/pass | alarm arms | arms skipped | false wakeups |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rep = r["report"]
        if not rep:
            continue
        g, lp = rep["guest"], rep["loop"]
        vt = rep.get("vcpu_timers") or {}
        loop_sys = sum(rep["loop_syscalls"].values())
        vcpu_sys = sum(rep.get("vcpu_syscalls", {}).values())
        ticks = g["ticks_injected"]
        passes = (lp["timer_passes"] + vt.get("passes", 0)) or 1
        reads = lp["clock_reads"]
        arms = lp["alarm_arms"] + vt.get("alarm_arms", 0)
        skipped = lp["alarm_arms_skipped"] + vt.get("alarm_arms_skipped", 0)
        false_w = lp["false_wakeups"] + vt.get("false_wakeups", 0)
        per_tick = (f"{(loop_sys + vcpu_sys) / ticks:.2f} ({loop_sys / ticks:.2f} + "
                    f"{vcpu_sys / ticks:.2f})") if ticks else "-"
        print(f"| {r['name']} | {ticks if ticks is not None else 'in KVM'} | "
              f"{g['ticks_lost'] if g['ticks_lost'] is not None else '-'} | "
              f"{fmt(g['hz_measured'])} | {per_tick} | "
              f"{fmt(reads / passes)} | {arms} | {skipped} | {false_w} |")

    if any(r["strace"] for r in rows):
        print("\n### strace -c -f, calls per syscall in the window\n")
        names = sorted({k for r in rows for k in r["strace"]})
        print("| syscall | " + " | ".join(r["name"] for r in rows) + " |")
        print("|---|" + "---|" * len(rows))
        for n in names:
            print(f"| {n} | " + " | ".join(str(r["strace"].get(n, 0)) for r in rows) + " |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
