#!/usr/bin/python3
"""tests/e2e/restore.py -- agentd survives a snapshot and a restore of its VM.

Boots the initramfs like e2e.py (its helpers, imported) with
`-device vmgenid,guid=A`, then, from the host:
  - a pipe session printing a numbered line every 20 ms ("ticker"), a tty
    shell ("shell": busybox sh, the initramfs has no bash), a `cat` waiting on
    stdin ("cat") with a long-poll from the host waiting on it, a `sleep` with
    timeout_ms 30000 ("timed");
  - POST /v1/sandbox/pause;
  - the monitor: stop, a pause of E2E_PAUSE_S (default 40) seconds, migrate
    "exec:cat > FILE", quit (this qemu, its user networking and every
    host-side connection are gone);
  - a new qemu with -incoming "exec:cat FILE", -S and vmgenid guid=B; cont.
Then the checks of issue 22:
  1. every session is listed and running; the ticker's lines go on from the
     client's last cursor, nothing repeated or lost (a gap only as
     dropped_chunks); stdin, resize, signals, a new session and files work;
  2. the connection of the old long-poll is let go in the guest (no
     ESTABLISHED connection left on :49984 but the one asking; PID 1's fds as
     before), and the long-poll sent again is served at once;
  3. agentd sees the restore by itself (generation 1 in /healthz and
     /metrics); the platform's POST /v1/sandbox/resumed shortly after is the
     same restore; the clock is right again;
  6. the stopped time counts for no timeout_ms: "timed" is still running
     after the resume and times out after 30 s of running time.
Prints the figures: time to detect, the clock step, time to let go of the
dead connection, CLOCK_MONOTONIC and CLOCK_BOOTTIME across the pause.

Environment: as e2e.py (INITRAMFS, AGENTD, KERNEL, QEMU, E2E_DIR,
E2E_BOOT_TIMEOUT), and E2E_PAUSE_S. Run it under the shared lock:
    flock /tmp/agentd-qemu.lock tests/e2e/restore.py
Exit status: 0 all passed, 1 a check failed, 77 skipped.
"""
import base64
import fcntl
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (boot, healthz, the checks' bookkeeping)
from e2e import check, log  # noqa: E402

TICK_CMD = "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.02; done"
PORT_HEX = "%04X" % e2e.GUEST_PORT


def monitor(path, line, timeout=30):
    """Send one HMP command; return its output (up to the next prompt)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(path)
        buf = b""
        while not buf.endswith(b"(qemu) "):
            buf += s.recv(4096)
        s.sendall(line.encode() + b"\n")
        buf = b""
        end = time.monotonic() + timeout
        while not buf.endswith(b"(qemu) ") and time.monotonic() < end:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        text = buf.decode("utf-8", "replace").replace("\r", "")
        return text.split("\n", 1)[1] if "\n" in text else text


def wait_monitor(path, line, pattern, timeout):
    end = time.monotonic() + timeout
    out = ""
    while time.monotonic() < end:
        try:
            out = monitor(path, line)
        except OSError:
            out = ""
        if re.search(pattern, out):
            return out
        time.sleep(0.2)
    return None


def sh(agent, cmd, timeout=60):
    """Run cmd in the guest; its output."""
    st, doc = agent.run({"cmd": cmd, "yield_ms": 20000}, timeout=timeout)
    return doc.get("text", "") if st == 201 else f"[{st} {doc}]"


def guest_conns(agent):
    """ESTABLISHED TCP connections on agentd's port in the guest (the asking one
    included)."""
    out = sh(agent, f"awk '$2 ~ /:{PORT_HEX}$/ && $4 == \"01\"' /proc/net/tcp | wc -l")
    try:
        return int(out.strip())
    except ValueError:
        return -1


def pid1_fds(agent):
    """What PID 1's fds are, sorted (pipe and socket inodes, and which
    session's cgroup a cgroup fd names, left out; so are the folders of
    /proc that the port feed's pid look keeps open from one refresh to
    the next while it walks, which come and go)."""
    out = sh(agent, "for f in /proc/1/fd/*; do readlink $f; done")
    return sorted(re.sub(r"/sessions/\d+$", "/sessions/N",
                         re.sub(r"\[\d+\]", "[]", l)) for l in out.split()
                  if not re.fullmatch(r"/proc(/\d+/fd)?", l))


def read_lines(agent, sid, cursor, want_last=None, deadline_s=30):
    """Read the ticker from cursor: (numbers, cursor, dropped_chunks)."""
    nums, dropped, text = [], 0, ""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        st, _, doc = agent.request("GET", f"/v1/sessions/{sid}?cursor={cursor}&wait_ms=2000")
        if st != 200:
            break
        dropped += doc.get("dropped_chunks", 0)
        text += e2e.output_text(doc)
        cursor = doc.get("cursor", cursor)
        done, _, text = text.rpartition("\n")
        for l in done.splitlines():
            m = re.fullmatch(r"line (\d+)", l.strip())
            if m:
                nums.append(int(m.group(1)))
        if want_last is None or (nums and nums[-1] >= want_last):
            if not doc.get("more"):
                break
    return nums, cursor, dropped


def consecutive(nums):
    return all(b == a + 1 for a, b in zip(nums, nums[1:]))


class LongPoll(threading.Thread):
    """GET with wait_ms on its own connection; the result or the exception."""

    def __init__(self, agent, path):
        super().__init__(daemon=True)
        self.agent, self.path = agent, path
        self.result, self.error, self.took = None, None, None

    def run(self):
        t0 = time.monotonic()
        try:
            self.result = self.agent.request("GET", self.path, timeout=120)
        except (OSError, http.client.HTTPException) as e:
            self.error = e
        self.took = time.monotonic() - t0


def main():
    qemu = shutil.which(os.environ.get("QEMU", "qemu-system-x86_64"))
    if not qemu:
        e2e.skip("qemu-system-x86_64 is missing: build-aux/deps.sh e2e")
    initrd = os.path.abspath(os.environ.get("INITRAMFS") or
                             os.path.join(e2e.ROOT, "build-static", "initramfs.cpio.gz"))
    workdir = os.environ.get("E2E_DIR") or os.path.join(os.path.dirname(initrd), "e2e-restore")
    os.makedirs(workdir, exist_ok=True)
    lock = open(os.path.join(workdir, "lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    e2e.initramfs_path(initrd)
    kver = e2e.initramfs_kver(initrd)
    kernel = e2e.kernel_path(kver, workdir)
    port = e2e.free_port()
    token = secrets.token_hex(16)
    agent = e2e.Agent(port, token)
    pause_s = float(os.environ.get("E2E_PAUSE_S", "40"))
    boot_timeout = float(os.environ.get("E2E_BOOT_TIMEOUT", "240"))
    sockdir = tempfile.mkdtemp(prefix="agentd-restore-")
    state = os.path.join(workdir, "vm.state")
    dirs = [os.path.join(workdir, "a"), os.path.join(workdir, "b")]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    mons = [os.path.join(sockdir, "a.sock"), os.path.join(sockdir, "b.sock")]
    guid_a, guid_b = str(uuid.uuid4()), str(uuid.uuid4())
    procs = []
    try:
        proc, console = e2e.boot(kernel, initrd, port, token, dirs[0], mons[0],
                                 ["-device", f"vmgenid,guid={guid_a}"])
        procs.append(proc)
        health, secs = e2e.wait_healthz(agent, proc, boot_timeout)
        if not check("boot A: healthz 200, generation 0",
                     health is not None and health.get("generation") == 0, f"{health}"):
            e2e.dump_console(console)
            return 1
        log(f"boot A: {secs:.1f} s")

        # The sessions.
        st, t = agent.run({"cmd": TICK_CMD, "id": "ticker"})
        check("ticker started", st == 201, f"{st} {t}")
        st, t = agent.run({"argv": ["/bin/sh"], "tty": True, "id": "shell", "rows": 24, "cols": 80})
        check("tty shell started", st == 201, f"{st} {t}")
        st, t = agent.run({"argv": ["cat"], "id": "cat"})
        check("cat started", st == 201, f"{st} {t}")
        nums, cursor, dropped = read_lines(agent, "ticker", 0, want_last=20)
        check("ticker: lines before the snapshot", nums[:1] == [1] and consecutive(nums),
              f"{nums[:5]}..{nums[-5:]}")
        st, t = agent.run({"argv": ["sleep", "100000"], "id": "timed", "timeout_ms": 30000})
        timed_host_t0 = time.time()
        check("timed started", st == 201, f"{st} {t}")
        fds_before = pid1_fds(agent)
        conns_before = guest_conns(agent)
        # The long-poll left waiting from the host (cat prints nothing yet).
        old_poll = LongPoll(agent, "/v1/sessions/cat?cursor=0&wait_ms=60000")
        old_poll.start()
        old_poll_t0 = time.monotonic()
        time.sleep(1)
        _, _, h0 = agent.request("GET", "/healthz")
        up0, host0 = h0["uptime_ms"], time.time()
        boot0 = float(sh(agent, "cut -d' ' -f1 /proc/uptime").strip() or "nan")
        nums, cursor, _ = read_lines(agent, "ticker", cursor)
        last_before = nums[-1] if nums else None
        log(f"before the snapshot: ticker at line {last_before} (cursor {cursor}), "
            f"PID 1 has {len(fds_before)} fds, {conns_before} connection(s) on :{e2e.GUEST_PORT}")

        st, _, doc = agent.request("POST", "/v1/sandbox/pause", {})
        check("pause: 200 {generation: 0, synced: true}",
              st == 200 and doc.get("generation") == 0 and doc.get("synced") is True,
              f"{st} {doc}")

        # Snapshot: stop, wait, migrate to a file, and this qemu goes.
        t_stop = time.time()
        old_poll_guest_s = time.monotonic() - old_poll_t0
        monitor(mons[0], "stop")
        time.sleep(pause_s)
        if os.path.exists(state):
            os.unlink(state)
        monitor(mons[0], f'migrate "exec:cat > {state}"', timeout=300)
        out = wait_monitor(mons[0], "info migrate", r"Migration status:\s*completed", 300)
        check("migrate to a file completed", out is not None, "")
        monitor(mons[0], "quit")
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        old_poll.join(timeout=30)
        check("the old long-poll's connection died on the host side",
              not old_poll.is_alive() and (old_poll.error is not None or old_poll.result is None
                                           or old_poll.result[0] != 200
                                           or not e2e.output_text(old_poll.result[2])),
              f"{old_poll.error!r} {old_poll.result!r}")
        log(f"state file: {os.path.getsize(state) >> 20} MiB")

        # Restore in a new qemu with another generation id.
        proc, console = e2e.boot(kernel, initrd, port, token, dirs[1], mons[1],
                                 ["-device", f"vmgenid,guid={guid_b}",
                                  "-incoming", f"exec:cat {state}", "-S"])
        procs.append(proc)
        out = wait_monitor(mons[1], "info status", r"VM status: paused(?! \(inmigrate\))", 300)
        check("incoming migration loaded", out is not None, "")
        monitor(mons[1], "cont")
        t_cont, t_cont_mono = time.time(), time.monotonic()
        stopped_s = t_cont - t_stop
        log(f"cont: the VM was stopped {stopped_s:.1f} s")

        # 3. Seen by agentd itself.
        gen, health = None, None
        while time.monotonic() - t_cont_mono < 60:
            try:
                st, _, health = agent.request("GET", "/healthz", auth=False, timeout=2)
                if st == 200 and health.get("generation", 0) >= 1:
                    gen = health["generation"]
                    break
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        detect_s = time.monotonic() - t_cont_mono
        check("restore seen by agentd itself: generation 1", gen == 1, f"{health}")
        log(f"restore seen {detect_s:.2f} s after cont")
        text = e2e.console_text(console)
        m = re.search(r"restore, generation 1 \(by (\w+)\): clock (\w+), step (-?\d+) ms", text)
        check("agentd's log: the restore, by whom, the clock step", m is not None,
              "\n".join(l for l in text.splitlines() if "restore" in l)[-500:])
        if m:
            log(f"seen by {m.group(1)}; clock {m.group(2)} stepped {m.group(3)} ms")
            check("the clock moved forward by about the stopped time",
                  m.group(2) == "rtc" and abs(int(m.group(3)) / 1000 - stopped_s) < 15,
                  f"{m.group(0)} stopped {stopped_s:.1f} s")
        st, _, met = agent.request("GET", "/metrics")
        check("metrics: agentd_generation 1",
              isinstance(met, bytes) and re.search(rb"^agentd_generation 1$", met, re.M), "")
        # The platform's report shortly after: the same restore.
        st, _, doc = agent.request("POST", "/v1/sandbox/resumed", {
            "unix_ms": int(time.time() * 1000),
            "entropy": base64.b64encode(os.urandom(64)).decode()})
        check("resumed: 200, the same restore, generation 1, entropy fed, clock to unix_ms",
              st == 200 and doc.get("generation") == 1 and doc.get("same_restore") is True
              and doc.get("entropy_bytes") == 64 and doc.get("clock") == "unix_ms"
              and "clock_error" not in doc and "entropy_error" not in doc
              and abs(doc.get("clock_step_ms", 99999)) < 3000, f"{st} {doc}")
        log(f"resumed answered {doc}")
        st, doc = agent.run({"argv": ["true"], "yield_ms": 20000})
        started = doc.get("started_at", "")
        host_ms = time.time() * 1000
        try:
            g = time.mktime(time.strptime(started[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            g = g * 1000 + int(started[20:23])
            check("the guest's clock is within 2 s of the host's", abs(host_ms - g) < 2000,
                  f"guest {started}, host {host_ms - g:.0f} ms ahead")
            log(f"guest clock - host clock: {g - host_ms:.0f} ms")
        except (ValueError, IndexError):
            check("session started_at parses", False, started)

        # 2. The dead connection let go: no ESTABLISHED but the asking one, fds as before.
        t0 = time.monotonic()
        n = guest_conns(agent)
        while n != conns_before and time.monotonic() - t0 < 30:
            time.sleep(0.5)
            n = guest_conns(agent)
        released_s = time.monotonic() - t_cont_mono
        check(f"the old connection is let go ({conns_before} connection(s) on :{e2e.GUEST_PORT})",
              n == conns_before, f"{n} still")
        log(f"old connection gone {released_s:.1f} s after cont (its long-poll waited "
            f"with wait_ms 60000, {old_poll_guest_s:.1f} s of it run before the stop)")
        # Sessions and connections of the checks just made may still be
        # closing: give them a moment.
        t0 = time.monotonic()
        fds = pid1_fds(agent)
        while fds != fds_before and time.monotonic() - t0 < 15:
            time.sleep(0.5)
            fds = pid1_fds(agent)
        check("PID 1's fds as before the snapshot", fds == fds_before,
              f"{len(fds)} now, {len(fds_before)} before: {fds} now, {fds_before} before")

        # 6. CLOCK_MONOTONIC and CLOCK_BOOTTIME across the pause.
        _, _, h1 = agent.request("GET", "/healthz")
        host1 = time.time()
        boot1 = float(sh(agent, "cut -d' ' -f1 /proc/uptime").strip() or "nan")
        mono_d = (h1["uptime_ms"] - up0) / 1000
        log(f"across the pause: host {host1 - host0:.1f} s, guest CLOCK_MONOTONIC "
            f"{mono_d:.1f} s, CLOCK_BOOTTIME {boot1 - boot0:.1f} s (VM stopped {stopped_s:.1f} s)")
        check("CLOCK_MONOTONIC stood still while stopped",
              mono_d < host1 - host0 - stopped_s + 10, f"{mono_d:.1f} s")

        # 1. Sessions, the ticker's lines, stdin, resize, signals.
        st, _, lst = agent.request("GET", "/v1/sessions")
        states = {s["id"]: s["state"] for s in (lst or {}).get("sessions", [])}
        check("every session listed and running",
              all(states.get(i) == "running" for i in ("ticker", "shell", "cat", "timed")), f"{states}")
        nums, cursor2, dropped = read_lines(agent, "ticker", cursor, want_last=(last_before or 0) + 100)
        check("ticker: the next lines from the last cursor, none repeated or lost",
              dropped == 0 and nums[:1] == [(last_before or 0) + 1] and consecutive(nums),
              f"dropped {dropped}, from {nums[:3]} to {nums[-3:]}, last before {last_before}")
        # 2. The long-poll sent again is served at once (stdin wakes it).
        t0 = time.monotonic()
        poll = LongPoll(agent, "/v1/sessions/cat?cursor=0&wait_ms=60000")
        poll.start()
        time.sleep(0.3)
        st, _, doc = agent.request("POST", "/v1/sessions/cat/stdin", {"text": "after the restore\n"})
        check("stdin: 200", st == 200, f"{st} {doc}")
        poll.join(timeout=30)
        got = e2e.output_text(poll.result[2]) if poll.result else ""
        check("the long-poll sent again is answered with the stdin's echo",
              poll.result is not None and poll.result[0] == 200 and "after the restore" in got,
              f"{poll.result!r} {poll.error!r}")
        log(f"long-poll sent again: answered {poll.took:.2f} s after it was sent "
            f"(0.3 s of it before the stdin)")
        st, _, doc = agent.request("POST", "/v1/sessions/shell/resize", {"rows": 40, "cols": 100})
        check("resize: 200", st == 200 and doc.get("rows") == 40, f"{st} {doc}")
        agent.request("POST", "/v1/sessions/shell/stdin", {"text": "stty size\n"})
        mm, text = agent.read_until("shell", r"\b40 100\b", 0)
        check("the shell sees its new size", mm is not None, repr(text[-200:]))
        st, _, doc = agent.request("POST", "/v1/sessions/ticker/signal", {"signal": "SIGTERM"})
        check("signal: 200", st == 200, f"{st} {doc}")
        st, _, doc = agent.request("GET", "/v1/sessions/ticker?wait_ms=10000&cursor=" + str(cursor2))
        for _ in range(20):
            if doc.get("state") == "exited":
                break
            st, _, doc = agent.request("GET", "/v1/sessions/ticker?wait_ms=2000&cursor=" + str(doc.get("cursor", 0)))
        check("the ticker ended by SIGTERM", doc.get("signal") == "SIGTERM", f"{doc.get('state')} {doc.get('signal')}")
        st, doc = agent.run({"cmd": "echo new session", "yield_ms": 20000})
        check("a new session runs", st == 201 and "new session" in doc.get("text", ""), f"{st} {doc}")
        st, _, doc = agent.request("POST", "/v1/files/stat", {"paths": ["/init"]})
        check("files: stat /init", st == 200 and doc["results"][0].get("exists") is True, f"{st} {doc}")

        # 6. timeout_ms counts running time only.
        st, _, doc = agent.request("GET", "/v1/sessions/timed")
        check("timed: still running after the resume", doc.get("state") == "running",
              f"{doc.get('state')} after {time.time() - timed_host_t0:.0f} s of host time")
        st, _, doc = agent.request("GET", "/v1/sessions/timed?wait_ms=60000&cursor=0")
        for _ in range(10):
            if doc.get("state") == "exited":
                break
            st, _, doc = agent.request("GET", "/v1/sessions/timed?wait_ms=10000&cursor=0")
        host_s = time.time() - timed_host_t0
        check("timed: timed out after 30 s of running time",
              doc.get("timed_out") is True and host_s > 30 + stopped_s - 5,
              f"{doc.get('state')} timed_out={doc.get('timed_out')} after {host_s:.0f} s of host time")
        log(f"timed out {host_s:.0f} s of host time after its start (30 s + {stopped_s:.0f} s stopped)")
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as e:
        check("the checks ran to the end", False, repr(e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.path.exists(state):
            os.unlink(state)
        shutil.rmtree(sockdir, ignore_errors=True)

    return e2e.verdict("restore", os.path.join(dirs[1], "console.log"))


if __name__ == "__main__":
    sys.exit(main())
