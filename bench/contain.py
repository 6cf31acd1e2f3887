#!/usr/bin/python3
"""bench/contain.py -- scenario 11 (issue 21, point 5): agentd stays responsive
while a session misbehaves inside its cgroup.

Boots the e2e VM once (tests/e2e/e2e.py's initramfs of the static build, qemu
TCG, one vCPU, 512 MiB), then measures from the host, over one keep-alive
connection each, the p95 of GET /healthz and of a keystroke's echo (POST
stdin {"text": "a", "wait_ms": ...} to a tty `cat`, answered with the echo):

  idle         nothing else runs
  fork bomb    `f() { f | f & }; f` held by limits.pids 64
  memory hog   an awk doubling a string, under limits.memory_bytes 64 MiB,
               restarted as soon as the OOM killer ends it: always at its limit
  4 CPU hogs   four busy loops in one session, no limit

Goal: each p95 under a hog at most 5x its idle p95.  Writes contain.md and
contain.tsv to --outdir and prints the table.  --quick: fewer samples (the
smoke test of bench/run.sh --quick).  Exit 0 (goals are reported, not
enforced), 77 when qemu, the kernel or the static build is missing.
qemu runs under flock /tmp/agentd-qemu.lock, so that two never run at once.
"""
import argparse
import fcntl
import http.client
import json
import os
import secrets
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import e2e  # noqa: E402  (boot, wait_healthz, the initramfs and the kernel)

QEMU_LOCK = "/tmp/agentd-qemu.lock"
GOAL = 5.0
HOGS = [
    ("fork bomb (pids 64)",
     {"cmd": "f() { f | f & }; f; sleep 1000", "limits": {"pids": 64}}),
    ("memory hog at its limit (64 MiB)",
     {"cmd": "while :; do awk 'BEGIN { s = \"x\"; while (1) s = s s }'; done",
      "limits": {"memory_bytes": 64 << 20}}),
    ("4 CPU hogs",
     {"cmd": "for i in 1 2 3 4; do (while :; do :; done) & done; wait"}),
]


class Conn:
    """One keep-alive HTTP connection to the guest."""

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.c = None

    def do(self, method, path, body=None, timeout=30):
        h = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.c.request(method, path, body=data, headers=h)
                r = self.c.getresponse()
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
            except (OSError, http.client.HTTPException):
                self.c.close()
                self.c = None
                if attempt:
                    raise
        return None, None


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def measure(hc, ec, n, gap_s):
    """n healthz and n keystroke echoes, alternating; their p95s in ms."""
    hz, echo = [], []
    for _ in range(n):
        t0 = time.monotonic()
        st, _ = hc.do("GET", "/healthz")
        hz.append((time.monotonic() - t0) * 1000)
        if st != 200:
            raise RuntimeError(f"healthz {st}")
        t0 = time.monotonic()
        st, doc = ec.do("POST", "/v1/sessions/echo/stdin", {"text": "a", "wait_ms": 10000})
        echo.append((time.monotonic() - t0) * 1000)
        if st != 200 or not doc.get("output"):
            raise RuntimeError(f"echo {st} {doc}")
        time.sleep(gap_s)
    return p95(hz), p95(echo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--outdir", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    n = 15 if args.quick else 200
    gap = 0.01 if args.quick else 0.02
    settle = 1.0 if args.quick else 3.0

    import shutil
    if not shutil.which(os.environ.get("QEMU", "qemu-system-x86_64")):
        print("contain: SKIP: no qemu-system-x86_64", flush=True)
        return 77
    static = os.path.join(ROOT, "build-static", "agentd", "agentd")
    if not os.path.exists(static) and not os.environ.get("INITRAMFS"):
        print("contain: SKIP: no static build (build-static/agentd/agentd)", flush=True)
        return 77
    initrd = os.path.abspath(os.environ.get("INITRAMFS") or
                             os.path.join(ROOT, "build-static", "initramfs.cpio.gz"))
    workdir = os.path.join(os.path.dirname(initrd), "e2e-contain")
    os.makedirs(workdir, exist_ok=True)
    try:
        e2e.initramfs_path(initrd)
        kernel = e2e.kernel_path(e2e.initramfs_kver(initrd), workdir)
    except SystemExit as e:
        if e.code == 77:
            print("contain: SKIP: no initramfs or kernel", flush=True)
        return 77 if e.code == 77 else 1

    lock = open(QEMU_LOCK, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    port, token = e2e.free_port(), secrets.token_hex(16)
    sockdir = tempfile.mkdtemp(prefix="agentd-contain-")
    proc, console = e2e.boot(kernel, initrd, port, token, workdir,
                             os.path.join(sockdir, "monitor.sock"))
    rows = []
    try:
        health, secs = e2e.wait_healthz(e2e.Agent(port, token), proc, 240)
        if health is None or health.get("containment") != "cgroup":
            print(f"contain: FAIL: no cgroup containment in the VM ({health})")
            e2e.dump_console(console)
            return 1
        hc, ec, cc = Conn(port, token), Conn(port, token), Conn(port, token)
        st, _ = cc.do("POST", "/v1/sessions", {"argv": ["cat"], "tty": True, "id": "echo"})
        if st != 201:
            raise RuntimeError(f"echo session {st}")
        measure(hc, ec, 5, gap)			# warm up
        idle = measure(hc, ec, n, gap)
        rows.append(("idle", idle))
        for name, body in HOGS:
            st, doc = cc.do("POST", "/v1/sessions", dict(body, id="hog"))
            if st != 201:
                raise RuntimeError(f"{name}: {st} {doc}")
            time.sleep(settle)
            rows.append((name, measure(hc, ec, n, gap)))
            st, _ = cc.do("DELETE", "/v1/sessions/hog?grace_ms=200", timeout=60)
            if st != 200:
                raise RuntimeError(f"{name}: DELETE {st}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(sockdir, ignore_errors=True)
        fcntl.flock(lock, fcntl.LOCK_UN)

    lines = ["| condition (VM, 1 vCPU) | healthz p95 | ratio | echo p95 | ratio | goal <= 5x |",
             "|---|---|---|---|---|---|"]
    tsv = ["condition\thealthz_p95_ms\techo_p95_ms\thealthz_ratio\techo_ratio\tmet"]
    for name, (h, e) in rows:
        rh, re_ = h / idle[0], e / idle[1]
        met = rh <= GOAL and re_ <= GOAL
        lines.append(f"| {name} | {h:.1f} ms | {rh:.2f}x | {e:.1f} ms | {re_:.2f}x | "
                     f"{'yes' if met else 'NO'} |")
        tsv.append(f"{name}\t{h:.3f}\t{e:.3f}\t{rh:.3f}\t{re_:.3f}\t{int(met)}")
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "contain.md"), "w") as f:
        f.write(f"Scenario 11, containment: {n} samples per condition, "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n")
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.outdir, "contain.tsv"), "w") as f:
        f.write("\n".join(tsv) + "\n")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
