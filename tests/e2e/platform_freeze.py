"""platform_freeze.py -- envd's pause routes with agentd as PID 1 and cgroup v2
its own (tests/e2e/envd_platform.py runs it): /freeze legacy and hierarchy seen
from outside (a counter that stops, the API that answers), /unfreeze and
/init that resume it, a cgroup the guest froze itself that stays frozen,
the lock's 503 while a freeze waits, /fsfreeze and /fsthaw on the
initramfs' rootfs, /collapse."""
import json
import re
import threading
import time

from e2e import check, output_text

CG = "/sys/fs/cgroup"
COUNTER = "i=0; while :; do i=$((i+1)); echo $i; usleep 50000; done"


class Counter:
    """A session printing a counter every 50 ms; last() is its latest."""

    def __init__(self, vm):
        self.vm, self.cursor, self.n = vm, 0, 0
        st, _, doc = vm.agent.request("POST", "/v1/sessions",
                                      {"cmd": COUNTER, "yield_ms": 300})
        self.ok = st == 201
        self.sid = doc.get("id") if isinstance(doc, dict) else None
        self.take(doc)

    def take(self, doc):
        nums = re.findall(r"\d+", output_text(doc))
        if nums:
            self.n = int(nums[-1])
        if isinstance(doc, dict):
            self.cursor = doc.get("cursor", self.cursor)

    def last(self):
        st, _, doc = self.vm.agent.request(
            "GET", f"/v1/sessions/{self.sid}?cursor={self.cursor}")
        self.take(doc)
        return st, self.n

    def stop(self):
        self.vm.agent.request("DELETE", f"/v1/sessions/{self.sid}?grace_ms=0")


def freeze(vm, query):
    st, h, raw = vm.envd("POST", "/freeze" + query)
    try:
        return st, json.loads(raw) if raw else None
    except ValueError:
        return st, raw


def file_number(vm, path):
    """The last number of a guest file, read through envd's GET /files."""
    st, _, raw = vm.envd("GET", f"/files?path={path}&username=root")
    nums = re.findall(rb"\d+", raw) if st == 200 else []
    return st, int(nums[-1]) if nums else -1


def stopped_and_served(vm, what, counter, path=None):
    """While frozen: the counter (and the file counter) stay put 1 s, and
    /healthz, a session read and the event feed answer."""
    st1, a = counter.last()
    f1 = file_number(vm, path)[1] if path else 0
    time.sleep(1.0)
    st2, b = counter.last()
    f2 = file_number(vm, path)[1] if path else 0
    check(f"{what}: the session's counter stops", st1 == st2 == 200 and a == b
          and a > 0, f"{st1} {a} -> {st2} {b}")
    if path:
        check(f"{what}: the guest cgroup's counter stops", f1 == f2 and f1 > 0,
              f"{f1} -> {f2}")
    t0 = time.monotonic()
    st, _, doc = vm.agent.request("GET", "/healthz", timeout=5)
    check(f"{what}: /healthz answers while frozen", st == 200,
          f"{st} in {time.monotonic() - t0:.2f}s")
    st, _, doc = vm.agent.request("GET", "/v1/events?cursor=0", timeout=5)
    check(f"{what}: the event feed answers while frozen", st == 200, f"{st}")
    st, _, _ = vm.envd("GET", "/health", timeout=5)
    check(f"{what}: envd's /health answers while frozen", st == 204, f"{st}")


def runs(vm, what, counter, path=None):
    _, a = counter.last()
    fa = file_number(vm, path)[1] if path else 0
    time.sleep(0.6)
    _, b = counter.last()
    fb = file_number(vm, path)[1] if path else 0
    check(f"{what}: the counter runs again", b > a, f"{a} -> {b}")
    if path:
        check(f"{what}: the guest cgroup's counter runs again", fb > fa,
              f"{fa} -> {fb}")


def checks(vm):
    code, out = vm.sh(f"grep ' {CG} ' /proc/mounts; cat /proc/self/cgroup; "
                      f"ls -d {CG}/agentd {CG}/sessions")
    if not check("freeze: cgroup v2 in the guest, agentd in R/agentd",
                 code == 0 and " cgroup2 " in out and "0::/sessions/" in out,
                 out):
        return
    c = Counter(vm)
    if not check("freeze: the counter session starts", c.ok and c.n > 0,
                 f"{c.sid} {c.n}"):
        return

    # legacy: the sessions' parent
    st, r = freeze(vm, "?mode=legacy&maxWaitMs=3000")
    check("freeze legacy: 200 FreezeResult", st == 200 and isinstance(r, dict),
          f"{st} {r}")
    if isinstance(r, dict):
        check("freeze legacy: the counts",
              (r["mode"], r["requested"], r["frozen"], r["notFrozen"],
               r["failed"], r["unobservable"], r["visited"]) ==
              ("legacy", 1, 1, 0, 0, 0, 0), json.dumps(r))
    stopped_and_served(vm, "freeze legacy", c)
    st, _, raw = vm.envd("POST", "/unfreeze")
    check("unfreeze: 204", st == 204, f"{st} {raw!r}")
    runs(vm, "unfreeze", c)

    # hierarchy: a guest cgroup with a counter, another the guest froze
    code, out = vm.sh(
        f"echo '{COUNTER}' > /tmp/counter.sh && "
        f"mkdir -p {CG}/gw {CG}/gf && echo 1 > {CG}/gf/cgroup.freeze && "
        f"setsid sh -c 'echo $$ > {CG}/gw/cgroup.procs; exec sh "
        f"/tmp/counter.sh' > /tmp/gw.count 2>&1 < /dev/null & sleep 0.3; "
        f"cat {CG}/gw/cgroup.procs")
    check("freeze: a guest cgroup runs a counter", code == 0 and out.strip(),
          out)
    st, r = freeze(vm, "?mode=hierarchy&maxWaitMs=3000")
    check("freeze hierarchy: 200 FreezeResult",
          st == 200 and isinstance(r, dict), f"{st} {r}")
    if isinstance(r, dict):
        check("freeze hierarchy: sessions and gw frozen, gf the guest's",
              r["mode"] == "hierarchy" and r["requested"] >= 2 and
              r["frozen"] == r["requested"] and r["notFrozen"] == 0 and
              r["failed"] == 0 and r["preFrozen"] == 1 and
              r["visited"] >= 3 and not r["truncated"], json.dumps(r))
    stopped_and_served(vm, "freeze hierarchy", c, "/tmp/gw.count")
    st, _, raw = vm.envd("POST", "/unfreeze")
    check("unfreeze after hierarchy: 204", st == 204, f"{st} {raw!r}")
    runs(vm, "unfreeze after hierarchy", c, "/tmp/gw.count")
    code, out = vm.sh(f"cat {CG}/gf/cgroup.freeze {CG}/gw/cgroup.freeze "
                      f"{CG}/sessions/cgroup.freeze")
    check("unfreeze: the guest's own frozen cgroup stays frozen, ours thaw",
          out.split() == ["1", "0", "0"], out)

    # /init thaws (envd's deferred unfreeze), a freeze answered 204
    st, _, raw = vm.envd("POST", "/freeze?mode=hierarchy")
    check("freeze without maxWaitMs: 204", st == 204 and raw == b"",
          f"{st} {raw!r}")
    time.sleep(0.3)
    stopped_and_served(vm, "freeze 204", c, "/tmp/gw.count")
    st, _, raw = vm.envd("POST", "/init", {})
    check("init: 204", st == 204, f"{st} {raw!r}")
    runs(vm, "init thaws", c, "/tmp/gw.count")
    code, out = vm.sh(f"cat {CG}/gf/cgroup.freeze")
    check("init: the guest's own frozen cgroup stays frozen",
          out.strip() == "1", out)

    # an /init agentd refuses (an unknown defaultUser) thaws all the same,
    # as envd's thaws whenever the body decodes
    st, _, raw = vm.envd("POST", "/freeze?mode=legacy")
    time.sleep(0.3)
    st2, _, raw2 = vm.envd("POST", "/init", {"defaultUser": "nosuchuser"})
    check("init refused: 400", (st, st2) == (204, 400), f"{st} {st2} {raw2!r}")
    runs(vm, "init refused thaws", c)

    lock(vm, c)

    # the rootfs: an initramfs (ramfs/tmpfs) has no freeze
    st, _, raw = vm.envd("POST", "/fsfreeze")
    msg = json.loads(raw).get("message", "") if raw.startswith(b"{") else ""
    check("fsfreeze: envd's 500 on a rootfs without freeze",
          st == 500 and msg.startswith("FIFREEZE /: "), f"{st} {raw!r}")
    st, _, raw = vm.envd("POST", "/fsthaw")
    check("fsthaw: 204 (not frozen: done)", st == 204, f"{st} {raw!r}")

    st, _, raw = vm.envd("POST", "/collapse")
    res = json.loads(raw) if st == 200 else {}
    check("collapse: 200 CollapseResult that adds up",
          st == 200 and res.get("chunks") == res.get("collapsed", 0) +
          res.get("alreadyHuge", 0) + res.get("skipped", 0) and
          (res["chunks"] > 0 or "nothing to collapse" in res.get("note", "")),
          f"{st} {raw!r}")

    vm.sh(f"kill $(cat {CG}/gw/cgroup.procs) 2>/dev/null; "
          f"echo 0 > {CG}/gf/cgroup.freeze; usleep 200000; "
          f"rmdir {CG}/gf {CG}/gw")
    c.stop()


KTHREADS = "khungtaskd|oom_reaper|kcompactd0|kswapd0|kdevtmpfs"


def kthread_in(vm, cg):
    """Move a kernel thread into cgroup cg (made): the freezer never stops
    one, so cg (and its parents) never read "frozen 1".  Its pid, or
    None."""
    code, out = vm.sh(
        f"mkdir -p {cg}; for d in /proc/[0-9]*; do "
        f"case $(cat $d/comm 2>/dev/null) in {KTHREADS}) "
        f"echo ${{d#/proc/}} > {cg}/cgroup.procs 2>/dev/null && "
        f"{{ echo ${{d#/proc/}}; break; }};; esac; done")
    pids = re.findall(r"^\d+$", out, re.M)
    return pids[0] if pids else None


def lock(vm, c):
    """A legacy freeze of the sessions with a kernel thread among them (the
    freezer skips kernel threads, so they never read frozen) waits its whole
    budget holding the lock: /freeze and /unfreeze get 503 meanwhile;
    /fsfreeze and /fsthaw, whose lock is another (envd's fsFreezeLock),
    /healthz and /init answer.  Then the guest takes the kernel
    thread out during a wait: the poll sees the sessions frozen before the
    budget ends, and the /init sent meanwhile thaws them when it ends."""
    k = kthread_in(vm, f"{CG}/sessions/k")
    if not check("lock: a kernel thread in the sessions' cgroups", k, ""):
        return
    res = {}

    def waiting(q):
        res["r"] = freeze(vm, q)

    t = threading.Thread(target=waiting,
                         args=("?mode=legacy&maxWaitMs=2000",))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.5)
    busy = [vm.envd("POST", p)[0] for p in
            ("/freeze?maxWaitMs=10", "/unfreeze", "/fsfreeze", "/fsthaw")]
    st, _, _ = vm.agent.request("GET", "/healthz", timeout=5)
    t.join()
    took = time.monotonic() - t0
    st1, r = res.get("r", (None, None))
    check("lock: the freeze waited its budget, its cgroup not frozen",
          st1 == 200 and isinstance(r, dict) and r["notFrozen"] == 1 and
          r["frozen"] == 0 and r["waitMs"] >= 1900 and took >= 1.9,
          f"{st1} {r} {took:.2f}s")
    check("lock: /freeze, /unfreeze 503 meanwhile; /fsfreeze, /fsthaw not",
          busy[:2] == [503] * 2 and 503 not in busy[2:], f"{busy}")
    check("lock: /healthz answers meanwhile", st == 200, f"{st}")
    _, _, text = vm.agent.request("GET", "/metrics")
    text = text.decode() if isinstance(text, bytes) else str(text)
    check("lock: /metrics counts the 503s",
          "agentd_envd_freeze_busy_total 2\n" in text, text[-600:])

    st, _, raw = vm.envd("POST", "/unfreeze")
    check("lock: unfreeze after the wait: 204", st == 204, f"{st} {raw!r}")

    # the guest moves the kernel thread out 1 s into the next wait, and a
    # process in (the kernel counts frozen tasks again when one freezes)
    code, out = vm.sh(
        f"mkdir -p {CG}/gu && setsid sh -c 'echo $$ > {CG}/gu/cgroup.procs; "
        f"sleep 1; echo {k} > {CG}/cgroup.procs; sh -c \"echo \\$\\$ > "
        f"{CG}/sessions/k/cgroup.procs; exec sleep 3\"' > /dev/null 2>&1 "
        f"< /dev/null & while [ -z \"$(cat {CG}/gu/cgroup.procs)\" ]; do "
        f"usleep 10000; done")
    t = threading.Thread(target=waiting,
                         args=("?mode=legacy&maxWaitMs=8000",))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.3)
    ist, _, raw = vm.envd("POST", "/init", {})
    t.join()
    took = time.monotonic() - t0
    st1, r = res.get("r", (None, None))
    check("lock: /init answers while a freeze waits", ist == 204,
          f"{ist} {raw!r}")
    check("lock: the poll sees the cgroup frozen before the budget ends",
          st1 == 200 and isinstance(r, dict) and r["frozen"] == 1 and
          r["notFrozen"] == 0 and 300 <= r["waitMs"] < 6000 and took < 6,
          f"{st1} {r} {took:.2f}s")
    runs(vm, "lock: /init's thaw ran when the wait ended", c)
    code, out = vm.sh(f"echo {k} > {CG}/cgroup.procs 2>/dev/null; "
                      f"kill $(cat {CG}/gu/cgroup.procs "
                      f"{CG}/sessions/k/cgroup.procs) 2>/dev/null; "
                      f"usleep 200000; rmdir {CG}/sessions/k {CG}/gu; "
                      f"cat {CG}/sessions/cgroup.freeze")
    check("lock: nothing left frozen", out.strip() == "0", out)
