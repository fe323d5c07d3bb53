#!/usr/bin/env python3
"""Networking beside QEMU (issue 24): the bundled guest's net=echo under minivmm and under QEMU
7.2's microvm with virtio-net-device, on the same TAP set-up and the same libslirp forward, side
by side in one run. Needs root (a network namespace, a TAP, /dev/kvm), ping and strace.

What it measures, for each VMM in turn (each boots the same guest image and command line):

  * TAP, in a network namespace of its own (host side 10.78.0.1/24, guest 10.78.0.2; IPv6 off on
    the TAP, so the host sends the idle guest nothing):
      - ping RTT: `ping -c N -i 0.005`, each reply's time, median and p99;
      - UDP echo latency: one 64-byte datagram to port 7 at a time, N of them, median and p99;
      - UDP echo rate: WINDOW datagrams kept in flight for SECONDS, 64 and 1472 bytes:
        datagrams echoed per second (and Mbit/s of payload each way).
  * user-mode networking (minivmm --net user, QEMU -netdev user; both libslirp 4.7) with a UDP
    host forward 127.0.0.1:PORT -> the guest's port 7: the same UDP latency and rate.
  * the idle cost of an idle NIC: the guest idles at 250 Hz with no NIC, with a TAP NIC and with
    a user-mode NIC and nothing is sent, each in turn, IDLE_ROUNDS times (medians); over a
    window of IDLE seconds: the VMM's CPU time (all
    its threads' schedstat) and, for minivmm, its own report over the same window (read through
    its control socket at both ends; per guest tick: syscalls of the loop and vCPU threads,
    context switches, loop wakeups, CPU); then `strace -c -f` over a second window of the same
    length (syscalls/s; strace slows each call, so its counts are upper bounds).

Ratios are minivmm / QEMU: below 1 means minivmm is faster (RTT) or cheaper (idle), above 1
means minivmm echoes more (rates).

QEMU runs as `-M microvm,acpi=off` (so it appends virtio_mmio.device= for the guest) with
`-global virtio-mmio.force-legacy=false` (the guest drives virtio 1.x only), the default CPU model
(QEMU 7.2 aborts with -cpu max on this host), its default in-kernel irqchip and PIT, and a
userspace virtio-net back-end (vhost off, QEMU's default). minivmm runs with its defaults.

Usage: scripts/bench_net.py [--build build] [--rounds 3] [--pings 400] [--udp 1000] [--seconds 2]
       [--window 16] [--idle-seconds 4] [--idle-rounds 3] [--no-qemu] [--no-strace] [--no-idle]
       [--json FILE]
"""

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_idle import strace_window  # noqa: E402  (strace -c over a window, parsed)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_IP, GUEST_IP = "10.78.0.1", "10.78.0.2"
TAP = "mvbench0"
HZ = 250
MAC = "52:54:00:12:34:56"  # minivmm's first NIC; QEMU is given the same
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def run(cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


# --------------------------------------------------------------------------- set-up ---

class Namespace:
    """A network namespace with one persistent TAP, host side addressed, removed at the end."""

    def __init__(self):
        self.name = f"minivmm-bench-{os.getpid()}"
        run(["ip", "netns", "add", self.name])
        ns = ["ip", "-n", self.name]
        try:
            run(ns + ["link", "set", "lo", "up"])
            run(ns + ["tuntap", "add", "dev", TAP, "mode", "tap"])
            run(["ip", "netns", "exec", self.name, "sysctl", "-qw",
                 f"net.ipv6.conf.{TAP}.disable_ipv6=1"])
            run(ns + ["addr", "add", f"{HOST_IP}/24", "dev", TAP])
            run(ns + ["link", "set", TAP, "up"])
        except subprocess.CalledProcessError as e:
            self.close()
            sys.exit(f"bench_net: setting up the TAP: {' '.join(e.cmd)}: {e.stderr.strip()}")

    def close(self):
        run(["ip", "netns", "del", self.name], check=False)

    def exec(self):
        return ["ip", "netns", "exec", self.name]

    @contextlib.contextmanager
    def entered(self):
        """The calling thread inside the namespace (sockets made here stay in it)."""
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            yield
        finally:
            libc.setns(home, CLONE_NEWNET)
            os.close(home)
            os.close(target)


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def minivmm_cmd(build, cmdline, net, stats):
    cmd = [os.path.join(build, "vmm", "minivmm"), "run",
           "--kernel", os.path.join(build, "guest", "minivmm-guest.bin"),
           "--cmdline", cmdline, "--stats", stats, "--api-socket", stats + ".sock", "--quiet",
           "--no-console-input"]
    return cmd + (["--net", net] if net else [])


def minivmm_report(stats):
    """The running minivmm's report so far, through its control socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(stats + ".sock")
        s.sendall(b'{"cmd":"stats"}\n')
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)["stats"]


def report_window(a, b):
    """Per guest tick between two reports: syscalls (loop and vCPU threads), context switches,
    loop wakeups (iterations), CPU."""
    ticks = b["guest"]["ticks_injected"] - a["guest"]["ticks_injected"]
    if ticks <= 0:
        return {}

    def calls(r):
        return sum(r["loop_syscalls"].values()) + sum(r["vcpu_syscalls"].values())

    def switches(r):
        return r["host"]["voluntary_ctx_switches"] + r["host"]["involuntary_ctx_switches"]

    def cpu(r):
        return r["host"]["cpu_user_s"] + r["host"]["cpu_sys_s"]

    return {"syscalls": (calls(b) - calls(a)) / ticks,
            "ctx_switches": (switches(b) - switches(a)) / ticks,
            "loop_wakeups": (b["loop"]["iterations"] - a["loop"]["iterations"]) / ticks,
            "cpu_us": (cpu(b) - cpu(a)) * 1e6 / ticks}


def qemu_cmd(build, cmdline, netdev):
    cmd = ["qemu-system-x86_64", "-M", "microvm,acpi=off", "-accel", "kvm", "-m", "64",
           "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
           "-serial", "stdio", "-monitor", "none",
           "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
           "-global", "virtio-mmio.force-legacy=false",
           "-kernel", os.path.join(build, "guest", "minivmm-guest.bin"), "-append", cmdline]
    if netdev:
        cmd += ["-netdev", f"{netdev},id=n0", "-device", f"virtio-net-device,netdev=n0,mac={MAC}"]
    return cmd


class Vm:
    """One VMM running the guest, started in the background; its console goes to a file."""

    running = []  # started and not yet stopped: stopped on the way out, whatever happens

    def __init__(self, cmd, wait_for, tmp, prefix=(), stats=None):
        self.out = tempfile.NamedTemporaryFile(dir=tmp, delete=False, suffix=".out").name
        self.stats = stats
        with open(self.out, "wb") as out:
            # ip netns exec execs in place: the pid is the VMM's.
            self.proc = subprocess.Popen(list(prefix) + cmd, stdout=out,
                                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        Vm.running.append(self)
        end = time.time() + 60
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited early ({self.proc.returncode}): "
                                   + self.console())
            if wait_for in self.console():
                time.sleep(0.3)  # the guest's timer and the first ticks
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{cmd[0]}: no '{wait_for}' on the console: " + self.console())

    def console(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def stop(self):
        if self in Vm.running:
            Vm.running.remove(self)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.stats and os.path.exists(self.stats) and os.path.getsize(self.stats):
            with open(self.stats) as f:
                return json.load(f)
        return None


# ----------------------------------------------------------------------- measuring ---

def pct(values, p):
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))]


def ping(ns, count):
    res = run(ns.exec() + ["ping", "-c", str(count), "-i", "0.005", "-W", "1", GUEST_IP],
              check=False)
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", res.stdout)]
    return {"rtt_ms": times, "lost": count - len(times)}


def udp_socket(ns, host, port):
    with ns.entered() if ns else contextlib.nullcontext():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, port))
    return s


def udp_latency(sock, count, size=64):
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    sock.settimeout(1.0)
    rtts, lost, wrong = [], 0, 0
    for _ in range(count):
        t0 = time.perf_counter_ns()
        sock.send(payload)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            lost += 1
            continue
        rtts.append((time.perf_counter_ns() - t0) / 1e6)
        wrong += data != payload
    return {"rtt_ms": rtts, "lost": lost, "wrong": wrong}


def udp_rate(sock, seconds, size, window):
    """Datagrams echoed per second with `window` in flight. A wait of a second for any reply
    gives up on all in flight (counted lost): on a busy host a VMM can stall for 0.1 s."""
    payload = bytes(size)
    sock.settimeout(1.0)
    got = lost = outstanding = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        while outstanding < window:
            sock.send(payload)
            outstanding += 1
        try:
            sock.recv(65536)
            got += 1
            outstanding -= 1
        except socket.timeout:
            lost += outstanding
            outstanding = 0
    elapsed = time.perf_counter() - start
    sock.settimeout(0.2)
    with contextlib.suppress(socket.timeout):
        while outstanding:
            sock.recv(65536)
            outstanding -= 1
    return {"per_s": got / elapsed, "mbit_s": got * size * 8 / elapsed / 1e6, "lost": lost}


def udp_suite(sock, args):
    out = {"lat": udp_latency(sock, args.udp)}
    for size in (64, 1472):
        out[f"rate{size}"] = udp_rate(sock, args.seconds, size, args.window)
    return out


def cpu_ns(pid):
    """CPU time of every thread of `pid` now (schedstat: ns on a CPU)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


def idle(vm, seconds, do_strace):
    """CPU over a window of `seconds` (and for minivmm its own counters over the same window),
    then strace over a second window."""
    before = minivmm_report(vm.stats) if vm.stats else None
    c0 = cpu_ns(vm.proc.pid)
    time.sleep(seconds)
    cpu_ms_s = (cpu_ns(vm.proc.pid) - c0) / 1e6 / seconds
    window = report_window(before, minivmm_report(vm.stats)) if vm.stats else {}
    calls = strace_window(vm.proc.pid, seconds) if do_strace else {}
    report = vm.stop()
    out = {"cpu_ms_s": cpu_ms_s, "strace_s": sum(calls.values()) / seconds if calls else None,
           "strace_top": sorted(calls.items(), key=lambda kv: -kv[1])[:4], "per_tick": window}
    if report:
        nic = report["devices"].get("virtio_net0", {})
        out["nic_frames"] = nic.get("rx_frames", 0) + nic.get("tx_frames", 0)
    return out


# -------------------------------------------------------------------------- output ---

def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def ratio(a, b, digits=2):
    return "-" if a is None or b in (None, 0) else f"{a / b:.{digits}f}x"


def row(label, m, q, digits=3):
    print(f"| {label} | {fmt(m, digits)} | {fmt(q, digits)} | {ratio(m, q)} |")


def merged(runs, *keys):
    """The lists under runs[i][keys...] of every round, joined."""
    out = []
    for r in runs:
        for k in keys:
            r = r.get(k, {})
        out += r or []
    return out


def median_of(runs, key, field):
    vals = [r[key][field] for r in runs if key in r]
    return pct(vals, 50)


def print_results(res, args):
    m, q = res.get("minivmm", {}), res.get("qemu", {})
    print(f"\n## net=echo, minivmm vs {res.get('qemu_version', 'QEMU')} microvm\n")
    print(f"{args.rounds} rounds, the VMMs alternating. Per round: {args.pings} pings at 5 ms "
          f"intervals; {args.udp} UDP datagrams of 64 bytes, one at a time; UDP rate: "
          f"{args.window} in flight for {args.seconds} s. RTTs: all rounds' samples; rates: the "
          "median round.\n")
    for title, key in (("TAP", "tap"), ("user (libslirp hostfwd)", "user")):
        md, qd = m.get(key, []), q.get(key, [])
        print(f"| {title} | minivmm | QEMU | minivmm / QEMU |")
        print("|---|---|---|---|")
        if key == "tap":
            a, b = merged(md, "ping", "rtt_ms"), merged(qd, "ping", "rtt_ms")
            row("ping RTT median, ms", pct(a, 50), pct(b, 50))
            row("ping RTT p99, ms", pct(a, 99), pct(b, 99))
            print(f"| pings lost | {sum(r['ping']['lost'] for r in md)} | "
                  f"{sum(r['ping']['lost'] for r in qd)} | |")
        a, b = merged(md, "lat", "rtt_ms"), merged(qd, "lat", "rtt_ms")
        row("UDP echo RTT median, ms", pct(a, 50), pct(b, 50))
        row("UDP echo RTT p99, ms", pct(a, 99), pct(b, 99))
        for size in (64, 1472):
            row(f"UDP echo {size} B, datagrams/s", median_of(md, f"rate{size}", "per_s"),
                median_of(qd, f"rate{size}", "per_s"), 0)
            row(f"UDP echo {size} B, Mbit/s each way", median_of(md, f"rate{size}", "mbit_s"),
                median_of(qd, f"rate{size}", "mbit_s"), 2)
        lost = [sum(r.get(k, {}).get("lost", 0) for r in d for k in ("lat", "rate64", "rate1472"))
                for d in (md, qd)]
        print(f"| UDP datagrams lost | {lost[0]} | {lost[1]} | |\n")
    if "idle" in m:
        print(f"## Idle cost of an idle NIC (guest at {HZ} Hz; medians of {args.idle_rounds} "
              f"windows of {args.idle_seconds} s)\n")
        print("| | CPU ms/s | strace syscalls/s | report: syscalls/tick | ctx switches/tick"
              " | loop wakeups/tick | CPU us/tick | NIC frames |")
        print("|---|---|---|---|---|---|---|---|")

        def med(runs, *path):
            vals = []
            for r in runs:
                for k in path:
                    r = r.get(k) if isinstance(r, dict) else None
                if r is not None:
                    vals.append(r)
            return pct(vals, 50)

        for who, name in ((m, "minivmm"), (q, "QEMU")):
            for net in ("none", "tap", "user"):
                runs = who.get("idle", {}).get(net)
                if not runs:
                    continue
                frames = sum(r.get("nic_frames", 0) for r in runs)
                print(f"| {name} {net} | {fmt(med(runs, 'cpu_ms_s'), 2)} | "
                      f"{fmt(med(runs, 'strace_s'), 1)} | "
                      f"{fmt(med(runs, 'per_tick', 'syscalls'), 3)} | "
                      f"{fmt(med(runs, 'per_tick', 'ctx_switches'), 3)} | "
                      f"{fmt(med(runs, 'per_tick', 'loop_wakeups'), 3)} | "
                      f"{fmt(med(runs, 'per_tick', 'cpu_us'), 1)} | "
                      f"{frames if name == 'minivmm' else '-'} |")
        if "idle" in q:
            print("\n| minivmm / QEMU, idle | CPU | strace syscalls |")
            print("|---|---|---|")
            for net in ("none", "tap", "user"):
                a, b = m["idle"].get(net, []), q["idle"].get(net, [])
                print(f"| {net} | {ratio(med(a, 'cpu_ms_s'), med(b, 'cpu_ms_s'))} | "
                      f"{ratio(med(a, 'strace_s'), med(b, 'strace_s'))} |")
        print()
        for who, name in ((m, "minivmm"), (q, "QEMU")):
            for net in ("none", "tap", "user"):
                top = [r["strace_top"] for r in who.get("idle", {}).get(net, []) if r["strace_top"]]
                if top:
                    print(f"- {name} {net}, most frequent syscalls under strace: "
                          + ", ".join(f"{k} {v}" for k, v in top[0]))


# ---------------------------------------------------------------------------- main ---

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the TAP and user runs")
    ap.add_argument("--pings", type=int, default=400, help="pings per round")
    ap.add_argument("--udp", type=int, default=1000, help="UDP latency samples per round")
    ap.add_argument("--seconds", type=float, default=2.0, help="each UDP rate run")
    ap.add_argument("--window", type=int, default=16, help="UDP datagrams in flight")
    ap.add_argument("--idle-seconds", type=float, default=4.0, help="each idle window")
    ap.add_argument("--idle-rounds", type=int, default=3)
    ap.add_argument("--no-qemu", action="store_true")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--no-idle", action="store_true")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("bench_net: needs root (a network namespace, a TAP device, /dev/kvm)")
    for f in ("vmm/minivmm", "guest/minivmm-guest.bin"):
        if not os.path.exists(os.path.join(args.build, f)):
            sys.exit(f"bench_net: {args.build}/{f} is missing: build first (cmake --build)")
    tools = {"ip": "iproute2", "ping": "iputils-ping", "strace": "strace",
             "qemu-system-x86_64": "qemu-system-x86"}
    if args.no_strace:
        del tools["strace"]
    if args.no_qemu:
        del tools["qemu-system-x86_64"]
    for tool, package in tools.items():
        if not shutil.which(tool):
            sys.exit(f"bench_net: {tool} is missing (apt-get install {package})")

    vmms = ["minivmm"] + ([] if args.no_qemu else ["qemu"])
    res = {v: {} for v in vmms}
    if not args.no_qemu:
        res["qemu_version"] = run(["qemu-system-x86_64", "--version"]).stdout.splitlines()[0]
    ns = Namespace()
    tmp = tempfile.mkdtemp(prefix="minivmm-bench-net-")
    try:
        def start(vmm, cmdline, kind, port=None, prefix=(), wait="net: mac="):
            stats = os.path.join(tmp, f"{vmm}.json")
            if vmm == "minivmm":
                net = {"tap": f"tap={TAP}", "user": f"user,hostfwd=udp:127.0.0.1:{port}-:7",
                       None: None}[kind]
                return Vm(minivmm_cmd(args.build, cmdline, net, stats), wait, tmp, prefix, stats)
            netdev = {"tap": f"tap,ifname={TAP},script=no,downscript=no",
                      "user": f"user,hostfwd=udp:127.0.0.1:{port}-:7", None: None}[kind]
            return Vm(qemu_cmd(args.build, cmdline, netdev), wait, tmp, prefix)

        # Rounds alternate the VMMs, so a neighbour's load reaches both alike.
        for rnd in range(args.rounds):
            for vmm in vmms:
                print(f"bench_net: round {rnd + 1}/{args.rounds}: {vmm}", file=sys.stderr)
                # TAP: ping, UDP.
                vm = start(vmm, f"net=echo ip={GUEST_IP}", "tap", prefix=ns.exec())
                try:
                    tap = {"ping": ping(ns, args.pings)}
                    with udp_socket(ns, GUEST_IP, 7) as s:
                        tap.update(udp_suite(s, args))
                finally:
                    vm.stop()
                res[vmm].setdefault("tap", []).append(tap)
                # libslirp through a host forward.
                port = free_udp_port()
                vm = start(vmm, "net=echo", "user", port=port)
                try:
                    with udp_socket(None, "127.0.0.1", port) as s:
                        res[vmm].setdefault("user", []).append(udp_suite(s, args))
                finally:
                    vm.stop()
        # Idle: every configuration once a round, in turn; strace in the first round only.
        idle_runs = {}
        for rnd in range(0 if args.no_idle else args.idle_rounds):
            for vmm in vmms:
                for kind in (None, "tap", "user"):
                    print(f"bench_net: idle round {rnd + 1}/{args.idle_rounds}: {vmm} "
                          f"{kind or 'no NIC'}", file=sys.stderr)
                    cmdline = f"timer=pit hz={HZ} ticks=0" + (
                        f" net=echo ip={GUEST_IP}" if kind == "tap" else " net=echo" if kind
                        else "")
                    vm = start(vmm, cmdline, kind, port=free_udp_port(),
                               prefix=ns.exec() if kind == "tap" else (),
                               wait="net: mac=" if kind else "minivmm-guest:")
                    idle_runs.setdefault((vmm, kind or "none"), []).append(
                        idle(vm, args.idle_seconds, not args.no_strace and rnd == 0))
        for (vmm, kind), runs in idle_runs.items():
            res[vmm].setdefault("idle", {})[kind] = runs
    finally:
        for vm in list(Vm.running):
            vm.stop()
        ns.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print_results(res, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
