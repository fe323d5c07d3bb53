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
    Plus minivmm's own figure from its report, `snapshot.restore_ms`: from the machine's first
    set-up step to the resume, without the process start.

The goal is a restore of at most 10 ms, flat in the guest's size: minivmm maps the memory from
the file (MAP_PRIVATE) and reads nothing of it, QEMU reads it all through the pipe.

Ratios are minivmm / QEMU (below 1: minivmm faster). Prints a table and writes OUT.json and,
with gnuplot, OUT.png.

QEMU runs with -accel kvm, its default CPU model (QEMU 7.2 aborts with -cpu max on some hosts),
-nodefaults and the same guest command line. Where /dev/kvm does not open here, run the whole
script inside scripts/nested_kvm.sh: both VMMs then run under nested KVM, whose times compare the
two with each other and with nothing else (docs/nested-kvm.md).

Usage: scripts/bench_snapshot.py [--build build] [--sizes 64M,1G] [--rounds 5] [--no-qemu]
       [--out /tmp/bench-snapshot] [--work DIR]
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
    restores, inner = [], []
    for i in range(a.rounds):
        rsock, stats = os.path.join(work, f"r{i}.sock"), os.path.join(work, f"r{i}.json")
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
                inner.append(json.load(f)["snapshot"]["restore_ms"])
        finally:
            stop(p)
    return {"save_ms": save_ms, "file_mib": file_blocks(snap) / 2**20,
            "restore_ms": statistics.median(restores), "restore_all_ms": restores,
            "restore_inner_ms": statistics.median(inner)}


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


def plot(results, out, note=""):
    if not shutil.which("gnuplot"):
        return
    dat = out + ".dat"
    with open(dat, "w") as f:
        for size, r in results.items():
            q = r.get("qemu", {})
            f.write(f"{size} {r['minivmm']['restore_ms']:.2f} {q.get('restore_ms', 0):.2f} "
                    f"{r['minivmm']['save_ms']:.2f} {q.get('save_ms', 0):.2f}\n")
    script = f"""
set terminal pngcairo size 900,450
set output '{out}.png'
set multiplot layout 1,2 title 'Snapshot and restore of the idle bundled guest (median of rounds){note}'
set style data histograms
set style fill solid 0.8
set ylabel 'ms'
set logscale y
set yrange [10:*]
set title 'restore: start to running'
plot '{dat}' using 2:xtic(1) title 'minivmm', '' using 3 title 'QEMU 7.2'
set title 'save: request to file written'
plot '{dat}' using 4:xtic(1) title 'minivmm', '' using 5 title 'QEMU 7.2'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script.encode(), check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="64M,1G")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--no-qemu", action="store_true")
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
    results = {}
    for size in a.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-snapshot-", dir=a.work) as work:
            r = {"minivmm": minivmm_round(a, size, work)}
            if use_qemu:
                r["qemu"] = qemu_round(a, size, work)
        results[size] = r
    print(f"{'size':>5} {'VMM':>8} {'save ms':>9} {'file MiB':>9} {'restore ms':>11} "
          f"{'(inside)':>9}")
    for size, r in results.items():
        for vmm, v in r.items():
            inside = f"{v['restore_inner_ms']:9.2f}" if "restore_inner_ms" in v else " " * 9
            print(f"{size:>5} {vmm:>8} {v['save_ms']:9.1f} {v['file_mib']:9.1f} "
                  f"{v['restore_ms']:11.2f} {inside}")
        if "qemu" in r:
            print(f"{size:>5} {'ratio':>8} {r['minivmm']['save_ms'] / r['qemu']['save_ms']:9.3f} "
                  f"{'':>9} {r['minivmm']['restore_ms'] / r['qemu']['restore_ms']:11.3f}")
    with open(a.out + ".json", "w") as f:
        json.dump(results, f, indent=2)
    plot(results, a.out, f", {a.note}" if a.note else "")
    print(f"wrote {a.out}.json" + (f" and {a.out}.png" if shutil.which("gnuplot") else ""))


if __name__ == "__main__":
    main()
