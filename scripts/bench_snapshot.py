#!/usr/bin/env python3
"""Snapshot and restore beside QEMU (issue 23): the bundled guest, idle at 250 Hz, saved and
restored by minivmm and by QEMU 7.2 in the same run, for each guest RAM size.

For each size (default 64M and 1G) and each VMM in turn:
  * save: the guest boots and runs until its banner; then it is saved, each VMM its own way,
    and the time from the request to the file being whole is taken:
      - minivmm: {"cmd":"snapshot","path":F,"resume":true} on its control socket (the reply
        comes once the file is renamed into place);
      - QEMU: QMP `migrate` to "exec:cat > F" (7.2 has no file: URI), polled with
        `query-migrate` until "completed".
    And the file's size on disk (du: holes are not counted).
  * restore, ROUNDS times: the time from starting the process to its API saying the guest
    runs:
      - minivmm: `run --restore F --api-socket S`; its control socket answers only from the
        loop, after the guest was resumed, so the first `stats` reply;
      - QEMU: `-incoming "exec:cat F" -qmp S`; query-status "running".
    Plus minivmm's own figures from its report: "to run", from just before the fork to the
    resume (`snapshot.resumed_monotonic_ns` against CLOCK_MONOTONIC read before starting it:
    the issue's "process start to the first guest instruction", without the socket's connect
    polling and the stats round trip that the first figure includes), and "inside",
    `snapshot.restore_ms`: from the machine's first set-up step to the resume.

Then the reset in place (issue 35), for each size and each amount of memory dirtied between
resets (--dirty, default 0, 1M and 16M; the guest's `dirty=KIB` writes a byte of each page over
that much memory at every tick, guest/README.md):
  * reset, ROUNDS times, each after the guest took --ticks ticks; with dirty=, after --ticks of
    its passes over the pages (one per tick), which it counts in a u64 at 0xfff000: minivmm keeps
    that page across resets as its --mailbox and reads it with {"cmd":"mailbox"}, QEMU's HMP `xp`
    reads it (loadvm sets it back; both wait for the count to grow by --ticks):
      - minivmm: `run --restore F --api-socket S`, then {"cmd":"reset"}: the reply's reset_ms
        and pages_dropped, and the client's round trip;
      - QEMU: a qcow2 disk (`-drive if=none`, so savevm has a place), HMP `savevm s0` once
        through QMP `human-monitor-command`, then `loadvm s0` timed per round.
  * rounds per second: for --loop-seconds, {reset; wait as above}; without dirty=, ticks are
    minivmm's stats `guest.ticks_injected` and QEMU's guest `tick_count` read with HMP `xp` (its
    address from the guest's ELF).
A QEMU run that fails is reported with why, and the rest goes on without it.

The goal is a restore of at most 10 ms, flat in the guest's size: minivmm maps the memory from
the file (MAP_PRIVATE) and reads nothing of it, QEMU reads it all through the pipe.

Ratios are minivmm / QEMU (below 1: minivmm faster). Prints a table and writes OUT.json and,
with gnuplot, OUT.png.

QEMU runs with -accel kvm, its default CPU model (QEMU 7.2 aborts with -cpu max on some hosts),
-nodefaults and the same guest command line. Where /dev/kvm does not open here, run the whole
script inside scripts/nested_kvm.sh: both VMMs then run under nested KVM, whose times compare the
two with each other and with nothing else (docs/nested-kvm.md).

Usage: scripts/bench_snapshot.py [--build build] [--sizes 64M,1G] [--rounds 5] [--no-qemu]
       [--dirty 0,1M,16M] [--ticks 2] [--loop-seconds 3] [--out /tmp/bench-snapshot] [--work DIR]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

GUEST_CMDLINE = "timer=pit hz=250 ticks=0"
# dirty=KIB counts its passes in a u64 here (guest/layout.h DIRTY_PASSES), in a page of its own:
# minivmm keeps it across resets as its --mailbox, QEMU's HMP `xp` reads it.
DIRTY_PASSES = 0xfff000


def dirty_cmdline(kib):
    return GUEST_CMDLINE + (f" dirty={kib}" if kib else "")


def parse_kib(text):
    """0, 4K, 1M, 16M -> KiB."""
    units = {"K": 1, "M": 1024, "G": 1024 * 1024}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def kib_label(kib):
    return f"{kib // 1024}M" if kib and kib % 1024 == 0 else f"{kib}K" if kib else "0"


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = pred()
        if r:
            return r
        time.sleep(0.0005)
    raise RuntimeError(f"timed out waiting for {what}")


def connect(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    except OSError:
        return None


class LineSocket:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def recv(self, timeout=600):
        self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the VMM closed its socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


class Qmp(LineSocket):
    def __init__(self, sock):
        super().__init__(sock)
        self.recv()  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.send(msg)
        while True:
            r = self.recv()
            if "return" in r or "error" in r:
                return r


def console_has(path, text):
    try:
        with open(path, "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


def file_blocks(path):
    return os.stat(path).st_blocks * 512


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def minivmm_round(a, size, work):
    binary = os.path.join(a.build, "vmm", "minivmm")
    guest = os.path.join(a.build, "guest", "minivmm-guest.bin")
    sock, snap, out = (os.path.join(work, n) for n in ("m.sock", "m.snap", "m.out"))
    with open(out, "wb") as o:
        p = subprocess.Popen([binary, "run", "--kernel", guest, "--cmdline", GUEST_CMDLINE,
                              "--memory", size, "--api-socket", sock, "--no-console-input",
                              "--quiet"], stdout=o, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: console_has(out, "minivmm-guest:"), 120, "minivmm's guest banner")
        c = LineSocket(wait_for(lambda: connect(sock), 60, "minivmm's control socket"))
        t0 = time.monotonic()
        c.send({"cmd": "snapshot", "path": snap, "resume": True})
        r = c.recv()
        save_ms = (time.monotonic() - t0) * 1000
        if not r.get("ok"):
            raise RuntimeError(f"minivmm snapshot failed: {r}")
    finally:
        stop(p)
    restores, inner, to_run, phases = [], [], [], []
    for i in range(a.rounds):
        rsock, stats = os.path.join(work, f"r{i}.sock"), os.path.join(work, f"r{i}.json")
        t0_ns = time.monotonic_ns()
        t0 = time.monotonic()
        p = subprocess.Popen([binary, "run", "--restore", snap, "--api-socket", rsock,
                              "--stats", stats, "--no-console-input", "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            c = LineSocket(wait_for(lambda: connect(rsock), 60, "the restored minivmm"))
            c.send({"cmd": "stats"})
            reply = c.recv()
            restores.append((time.monotonic() - t0) * 1000)
            if not reply.get("ok"):
                raise RuntimeError(f"restored minivmm: {reply}")
            c.send({"cmd": "quit"})
            c.recv()
            p.wait(timeout=60)
            with open(stats) as f:
                report = json.load(f)["snapshot"]
                inner.append(report["restore_ms"])
                # CLOCK_MONOTONIC both sides: from just before the fork to the guest let run.
                if report.get("resumed_monotonic_ns") is not None:
                    to_run.append((report["resumed_monotonic_ns"] - t0_ns) / 1e6)
                phases = report.get("restore_phases", [])
        finally:
            stop(p)
    return {"save_ms": save_ms, "file_mib": file_blocks(snap) / 2**20,
            "restore_ms": statistics.median(restores), "restore_all_ms": restores,
            "restore_inner_ms": statistics.median(inner), "restore_phases": phases,
            **({"restore_to_run_ms": statistics.median(to_run)} if to_run else {})}


def top_phases(phases, n=3):
    return sorted(phases, key=lambda p: -p["ms"])[:n]


def minivmm_reset(a, size, kib, work):
    """Boot with dirty=KIB, snapshot, restore with --api-socket, then time resets."""
    binary = os.path.join(a.build, "vmm", "minivmm")
    guest = os.path.join(a.build, "guest", "minivmm-guest.bin")
    # Names of this dirty amount's own: a console file left by the one before would show its
    # banner before this guest has one.
    sock, snap, out = (os.path.join(work, f"d{kib}.{n}") for n in ("sock", "snap", "out"))
    with open(out, "wb") as o:
        p = subprocess.Popen([binary, "run", "--kernel", guest, "--cmdline", dirty_cmdline(kib),
                              "--memory", size, "--api-socket", sock, "--no-console-input",
                              "--quiet"], stdout=o, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: console_has(out, "minivmm-guest:"), 120, "minivmm's guest banner")
        c = LineSocket(wait_for(lambda: connect(sock), 60, "minivmm's control socket"))
        c.send({"cmd": "snapshot", "path": snap, "resume": False})
        r = c.recv()
        if not r.get("ok"):
            raise RuntimeError(f"minivmm snapshot failed: {r}")
    finally:
        stop(p)
    rsock, stats = os.path.join(work, f"d{kib}.r.sock"), os.path.join(work, f"d{kib}.r.json")
    mailbox = ["--mailbox", f"{DIRTY_PASSES:#x},4096"] if kib else []
    p = subprocess.Popen([binary, "run", "--restore", snap, "--api-socket", rsock, "--stats", stats,
                          "--no-console-input", "--quiet"] + mailbox,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = LineSocket(wait_for(lambda: connect(rsock), 60, "the restored minivmm"))

        def ticks():
            c.send({"cmd": "stats"})
            r = c.recv()
            if not r.get("ok"):
                raise RuntimeError(f"restored minivmm: {r}")
            return r["stats"]["guest"]["ticks_injected"]

        def passes():
            c.send({"cmd": "mailbox", "offset": 0, "read": 8})
            r = c.recv()
            if not r.get("ok"):
                raise RuntimeError(f"minivmm mailbox: {r}")
            return int.from_bytes(bytes.fromhex(r["hex"]), "little")

        # The guest's progress: with dirty=, its passes over the pages (each after a tick);
        # without, the ticks it was given.
        progress = passes if kib else ticks

        def wait_ticks(k):
            start = progress()
            wait_for(lambda: progress() >= start + k, 60, f"{k} guest ticks")

        resets = []
        for _ in range(a.rounds):
            wait_ticks(a.ticks)
            t0 = time.monotonic()
            c.send({"cmd": "reset"})
            r = c.recv()
            rtt = (time.monotonic() - t0) * 1000
            if not r.get("ok"):
                raise RuntimeError(f"minivmm reset: {r}")
            resets.append({"rtt_ms": rtt, **{k: r[k] for k in (
                "reset_ms", "pause_ms", "drop_ms", "load_ms", "resume_ms", "pages_dropped",
                "pages_scanned")}})
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < a.loop_seconds:
            c.send({"cmd": "reset"})
            if not c.recv().get("ok"):
                raise RuntimeError("minivmm reset failed in the loop")
            wait_ticks(a.ticks)
            n += 1
        per_s = n / (time.monotonic() - t0)
        c.send({"cmd": "quit"})
        c.recv()
        p.wait(timeout=60)
    finally:
        stop(p)
    med = lambda k: statistics.median(x[k] for x in resets)
    return {"dirty_kib": kib, "reset_ms": med("reset_ms"), "rtt_ms": med("rtt_ms"),
            "pages_dropped": med("pages_dropped"), "pages_scanned": med("pages_scanned"),
            "phases_ms": {k: med(k) for k in ("pause_ms", "drop_ms", "load_ms", "resume_ms")},
            "rounds_per_s": per_s, "all": resets}


def guest_symbol(a, name):
    """The guest's ELF, beside its image: where a variable lives (QEMU's HMP `xp` reads it)."""
    elf = os.path.join(a.build, "guest", "minivmm-guest.elf")
    try:
        out = subprocess.run(["nm", elf], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[2] == name:
            return int(f[0], 16)
    return None


def qemu_cmd(a, size, qmp, extra):
    guest = os.path.join(a.build, "guest", "minivmm-guest.bin")
    return [a.qemu, "-accel", "kvm", "-m", size, "-nodefaults", "-no-user-config",
            "-display", "none", "-monitor", "none", "-device",
            "isa-debug-exit,iobase=0xf4,iosize=4", "-kernel", guest, "-append", GUEST_CMDLINE,
            "-qmp", f"unix:{qmp},server=on,wait=off"] + extra


def qemu_round(a, size, work):
    qmp, snap, out = (os.path.join(work, n) for n in ("q.qmp", "q.snap", "q.out"))
    p = subprocess.Popen(qemu_cmd(a, size, qmp, ["-serial", f"file:{out}"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: console_has(out, "minivmm-guest:"), 120, "QEMU's guest banner")
        q = Qmp(wait_for(lambda: connect(qmp), 60, "QEMU's QMP socket"))
        t0 = time.monotonic()
        r = q.cmd("migrate", uri=f"exec:cat > {snap}")
        if "error" in r:
            raise RuntimeError(f"QEMU migrate: {r}")
        def done():
            s = q.cmd("query-migrate")["return"].get("status")
            if s == "failed":
                raise RuntimeError("QEMU's migration failed")
            return s == "completed"
        wait_for(done, 600, "QEMU's migration")
        save_ms = (time.monotonic() - t0) * 1000
    finally:
        stop(p)
    restores = []
    for i in range(a.rounds):
        rq = os.path.join(work, f"rq{i}.qmp")
        t0 = time.monotonic()
        # The same devices as the source (a serial port included), or the stream is refused.
        err = open(os.path.join(work, f"rq{i}.err"), "wb")
        p = subprocess.Popen(qemu_cmd(a, size, rq, ["-serial", "file:/dev/null", "-incoming",
                                                    f"exec:cat {snap}"]),
                             stdout=subprocess.DEVNULL, stderr=err)
        try:
            q = Qmp(wait_for(lambda: connect(rq), 60, "the restoring QEMU's QMP"))
            try:
                wait_for(lambda: q.cmd("query-status")["return"]["status"] == "running", 600,
                         "QEMU's restored guest to run")
            except (OSError, RuntimeError) as e:
                with open(os.path.join(work, f"rq{i}.err")) as f:
                    raise RuntimeError(f"QEMU's restore failed ({e}): {f.read().strip()}")
            restores.append((time.monotonic() - t0) * 1000)
        finally:
            stop(p)
            err.close()
    return {"save_ms": save_ms, "file_mib": file_blocks(snap) / 2**20,
            "restore_ms": statistics.median(restores), "restore_all_ms": restores}


def qemu_reset(a, size, kib, work):
    """savevm once to a qcow2 disk, then loadvm per round (HMP through QMP)."""
    tick_addr = guest_symbol(a, "tick_count")
    if tick_addr is None:
        raise RuntimeError("no tick_count in the guest's ELF (needed to count QEMU's ticks)")
    qmp, disk, out, err = (os.path.join(work, f"l{kib}.{n}") for n in ("qmp", "qcow2", "out", "err"))
    subprocess.run([a.qemu_img, "create", "-q", "-f", "qcow2", disk, "64M"], check=True)
    cmd = qemu_cmd(a, size, qmp, ["-serial", f"file:{out}", "-drive",
                                  f"if=none,id=d0,format=qcow2,file={disk}"])
    cmd[cmd.index("-append") + 1] = dirty_cmdline(kib)
    with open(err, "wb") as e:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=e)
    try:
        try:
            wait_for(lambda: console_has(out, "minivmm-guest:"), 120, "QEMU's guest banner")
        except RuntimeError as e:
            with open(err) as f:
                raise RuntimeError(f"{e}: {f.read().strip()}")
        q = Qmp(wait_for(lambda: connect(qmp), 60, "QEMU's QMP socket"))

        def hmp(line):
            r = q.cmd("human-monitor-command", **{"command-line": line})
            if "error" in r:
                raise RuntimeError(f"QEMU {line}: {r['error']}")
            return r["return"]

        def word(addr):
            # "0000000000103198: 0x00000000000001f4"
            return int(hmp(f"xp /1gx {addr:#x}").split(":")[1], 16)

        # As minivmm's: dirty='s passes, else the guest's own tick count.
        where = DIRTY_PASSES if kib else tick_addr

        def wait_ticks(k):
            start = word(where)
            wait_for(lambda: word(where) >= start + k, 60, f"{k} guest ticks in QEMU")

        t0 = time.monotonic()
        r = hmp("savevm s0")
        save_ms = (time.monotonic() - t0) * 1000
        if r.strip():
            raise RuntimeError(f"QEMU savevm: {r.strip()}")
        loads = []
        for _ in range(a.rounds):
            wait_ticks(a.ticks)
            t0 = time.monotonic()
            r = hmp("loadvm s0")
            loads.append((time.monotonic() - t0) * 1000)
            if r.strip():
                raise RuntimeError(f"QEMU loadvm: {r.strip()}")
        if q.cmd("query-status")["return"]["status"] != "running":
            raise RuntimeError("QEMU's guest does not run after loadvm")
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < a.loop_seconds:
            hmp("loadvm s0")
            wait_ticks(a.ticks)
            n += 1
        per_s = n / (time.monotonic() - t0)
    finally:
        stop(p)
    return {"dirty_kib": kib, "savevm_ms": save_ms, "reset_ms": statistics.median(loads),
            "rounds_per_s": per_s, "all_ms": loads}


def plot(results, out, note=""):
    """Four panels; QEMU's bars only where it has figures (--no-qemu draws minivmm's alone)."""
    if not shutil.which("gnuplot"):
        return
    with_qemu = any("qemu" in r for r in results.values())
    dat, rdat = out + ".dat", out + "-reset.dat"
    with open(dat, "w") as f:
        for size, r in results.items():
            q = r.get("qemu", {})
            f.write(f"{size} {r['minivmm']['restore_ms']:.2f} {q.get('restore_ms', 'NaN')} "
                    f"{r['minivmm']['save_ms']:.2f} {q.get('save_ms', 'NaN')}\n")
    with open(rdat, "w") as f:
        for size, r in results.items():
            rq = r.get("reset", {}).get("qemu", {})
            for label, m in r.get("reset", {}).get("minivmm", {}).items():
                q = rq.get(label, {})
                f.write(f"{size}/{label} {m['reset_ms']:.3f} {q.get('reset_ms', 'NaN')} "
                        f"{m['rounds_per_s']:.2f} {q.get('rounds_per_s', 'NaN')}\n")

    def bars(file, col):
        p = f"'{file}' using {col}:xtic(1) title 'minivmm'"
        return p + (f", '' using {col + 1} title 'QEMU 7.2'" if with_qemu else "")

    script = f"""
set terminal pngcairo size 1200,900
set output '{out}.png'
set multiplot layout 2,2 title 'Snapshot, restore and reset of the bundled guest (median of rounds){note}'
set style data histograms
set style fill solid 0.8
set datafile missing 'NaN'
set key top left
set ylabel 'ms'
set logscale y
set title 'restore: start to running'
plot {bars(dat, 2)}
set title 'save: request to file written'
plot {bars(dat, 4)}
set title 'reset to the snapshot (QEMU: loadvm), RAM/dirtied'
set xtics rotate by -45
plot {bars(rdat, 2)}
set title 'rounds per second: reset + {{ticks}} ticks (dirtied: passes), RAM/dirtied'
set ylabel 'rounds/s'
unset logscale y
set yrange [0:*]
plot {bars(rdat, 4)}
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script.replace("{ticks}", str(
        next(iter(results.values())).get("reset", {}).get("ticks", "K"))).encode(), check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="64M,1G")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--qemu-img", default="qemu-img")
    ap.add_argument("--no-qemu", action="store_true")
    ap.add_argument("--dirty", default="0,1M,16M",
                    help="memory the guest dirties between resets (its dirty=KIB), a list")
    ap.add_argument("--ticks", type=int, default=2,
                    help="guest ticks (with dirty=: passes over its pages) between resets, the short "
                    "test of each round")
    ap.add_argument("--loop-seconds", type=float, default=3.0,
                    help="how long the rounds-per-second loop runs, per size and dirty amount")
    ap.add_argument("--out", default="/tmp/bench-snapshot")
    ap.add_argument("--note", default="", help="added to the plot's title (where it ran)")
    ap.add_argument("--plot-from", default=None, help="redraw OUT.png from a JSON of an earlier run")
    ap.add_argument("--work", default=None, help="folder for the snapshots and sockets "
                    "(default: a temporary one)")
    a = ap.parse_args()
    if a.plot_from:
        with open(a.plot_from) as f:
            plot(json.load(f), a.out, f", {a.note}" if a.note else "")
        return
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("bench_snapshot.py: /dev/kvm does not open here (run it inside "
                 "scripts/nested_kvm.sh)")
    use_qemu = not a.no_qemu and shutil.which(a.qemu)
    if not a.no_qemu and not use_qemu:
        print(f"bench_snapshot.py: no {a.qemu} here: minivmm alone")
    dirty = [parse_kib(d) for d in a.dirty.split(",")]
    results = {}
    for size in a.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-snapshot-", dir=a.work) as work:
            r = {"minivmm": minivmm_round(a, size, work)}
            if use_qemu:
                try:
                    r["qemu"] = qemu_round(a, size, work)
                except (OSError, RuntimeError, KeyError, ValueError) as e:
                    r["qemu_error"] = str(e)
                    print(f"{size}: QEMU's save/restore is left out: {e}")
            reset = {"ticks": a.ticks, "minivmm": {}, "qemu": {}}
            for kib in dirty:
                reset["minivmm"][kib_label(kib)] = minivmm_reset(a, size, kib, work)
                if use_qemu:
                    try:
                        reset["qemu"][kib_label(kib)] = qemu_reset(a, size, kib, work)
                    except (OSError, RuntimeError, KeyError, ValueError, IndexError,
                            subprocess.CalledProcessError) as e:
                        reset.setdefault("qemu_errors", {})[kib_label(kib)] = str(e)
                        print(f"{size} dirty {kib_label(kib)}: QEMU's loadvm is left out: {e}")
            r["reset"] = reset
        results[size] = r
    print(f"{'size':>5} {'VMM':>8} {'save ms':>9} {'file MiB':>9} {'restore ms':>11} "
          f"{'(to run)':>9} {'(inside)':>9}  top restore phases (ms)")
    for size, r in results.items():
        for vmm in ("minivmm", "qemu"):
            if vmm not in r:
                continue
            v = r[vmm]
            inside = f"{v['restore_inner_ms']:9.2f}" if "restore_inner_ms" in v else " " * 9
            to_run = f"{v['restore_to_run_ms']:9.2f}" if "restore_to_run_ms" in v else " " * 9
            phases = ", ".join(f"{p['phase']} {p['ms']:.2f}"
                               for p in top_phases(v.get("restore_phases", [])))
            print(f"{size:>5} {vmm:>8} {v['save_ms']:9.1f} {v['file_mib']:9.1f} "
                  f"{v['restore_ms']:11.2f} {to_run} {inside}  {phases}")
        if "qemu" in r:
            print(f"{size:>5} {'ratio':>8} {r['minivmm']['save_ms'] / r['qemu']['save_ms']:9.3f} "
                  f"{'':>9} {r['minivmm']['restore_ms'] / r['qemu']['restore_ms']:11.3f}")
    print()
    print(f"reset to the snapshot after {a.ticks} ticks (minivmm: {{\"cmd\":\"reset\"}}; "
          f"QEMU: HMP loadvm), median of {a.rounds}; rounds/s over {a.loop_seconds} s")
    print(f"{'size':>5} {'dirty':>6} {'VMM':>8} {'reset ms':>9} {'rtt ms':>8} {'dropped':>8} "
          f"{'rounds/s':>9}  minivmm's steps (ms)")
    for size, r in results.items():
        rs = r["reset"]
        for label, m in rs["minivmm"].items():
            steps = " ".join(f"{k[:-3]} {v:.2f}" for k, v in m["phases_ms"].items())
            print(f"{size:>5} {label:>6} {'minivmm':>8} {m['reset_ms']:9.2f} {m['rtt_ms']:8.2f} "
                  f"{m['pages_dropped']:8.0f} {m['rounds_per_s']:9.1f}  {steps}")
            q = rs["qemu"].get(label)
            if q:
                print(f"{size:>5} {label:>6} {'qemu':>8} {q['reset_ms']:9.2f} {'':>8} {'':>8} "
                      f"{q['rounds_per_s']:9.1f}  (savevm {q['savevm_ms']:.0f} ms)")
                print(f"{size:>5} {label:>6} {'ratio':>8} {m['reset_ms'] / q['reset_ms']:9.4f} "
                      f"{m['rtt_ms'] / q['reset_ms']:8.4f} {'':>8} "
                      f"{m['rounds_per_s'] / q['rounds_per_s']:9.2f}")
    print("ratios are minivmm / QEMU (reset ms: below 1 is minivmm faster; rtt: minivmm's "
          "client round trip against loadvm's; rounds/s: above 1 is minivmm faster)")
    with open(a.out + ".json", "w") as f:
        json.dump(results, f, indent=2)
    plot(results, a.out, f", {a.note}" if a.note else "")
    print(f"wrote {a.out}.json" + (f" and {a.out}.png" if shutil.which("gnuplot") else ""))


if __name__ == "__main__":
    main()
