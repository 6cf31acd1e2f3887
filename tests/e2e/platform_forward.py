"""platform_forward.py -- services on localhost reach the platform: a
service on the guest's 127.0.0.1:8000 answers at 169.254.0.21:8000, the
host reaching it through qemu's hostfwd (tests/e2e/envd_platform.py runs it;
agentd is PID 1 there, so forwarding is on by default)."""
import http.client
import socket
import time

from e2e import check

GUEST_IP = "169.254.0.21"


def get(port, timeout=2):
    """GET / on the host's port: (status, body), or None when nothing answers
    (qemu's hostfwd accepts, then closes when the guest refuses)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/index.html")
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()


def wait(port, want, timeout):
    """Poll until get(port) is (200, body) (want) or None (not want); the
    seconds it took, or None at the timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        r = get(port)
        if (r is not None and r[0] == 200) == want:
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def ports(vm, port):
    st, _, doc = vm.agent.request("GET", f"/v1/ports?port={port}")
    return doc.get("ports", []) if st == 200 and isinstance(doc, dict) else []


def stop(vm, port, timeout=30):
    """Kill the service on port (busybox's httpd is "busybox" to pidof) once
    /v1/ports names its pid: a socket's holder is looked up a bounded slice
    of /proc at a time (ports.c), slow under TCG, so a new one's pid may be
    null for a while."""
    t0 = time.monotonic()
    while True:
        pids = {e["pid"] for e in ports(vm, port) if e.get("pid") and e["pid"] != 1}
        if pids or time.monotonic() - t0 > timeout:
            break
        time.sleep(0.2)
    for pid in pids:
        vm.sh(f"kill {pid}")
    return pids


def checks(vm):
    host = vm.host_port(8000)
    code, out = vm.sh("mkdir -p /tmp/www && echo hello-forward > /tmp/www/index.html"
                      " && busybox httpd -p 127.0.0.1:8000 -h /tmp/www && echo started")
    if not check("forward: busybox httpd on 127.0.0.1:8000", code == 0 and
                 "started" in out, f"{code} {out!r}"):
        return
    took = wait(host, True, 10)
    check("forward: reached from the host through 169.254.0.21:8000",
          took is not None and took < 5, f"after {took} s")
    r = get(host)
    check("forward: the service's page", r == (200, b"hello-forward\n"), repr(r))
    lo = [e for e in ports(vm, 8000) if e["address"] == "127.0.0.1"]
    check("forward: GET /v1/ports says forwarded_on",
          len(lo) == 1 and (lo[0].get("forward") or {}).get("forwarded_on") ==
          f"{GUEST_IP}:8000", repr(lo))
    st, _, stat = vm.agent.request("GET", "/metrics")
    check("forward: agentd_forwards in /metrics",
          st == 200 and b"agentd_forwards 1\n" in stat, f"{st}")
    # Many requests, one after another, through the forward.
    t0 = time.monotonic()
    ok = sum(get(host) == (200, b"hello-forward\n") for _ in range(50))
    check("forward: 50 requests in a row", ok == 50,
          f"{ok}/50 in {time.monotonic() - t0:.2f} s")
    # Stopped: the forward goes; started again: it comes back.
    check("forward: the service's pid listed", stop(vm, 8000), repr(ports(vm, 8000)))
    took = wait(host, False, 10)
    check("forward: nothing answers once the service stops", took is not None and
          took < 5, f"after {took} s")
    t0 = time.monotonic()
    while ports(vm, 8000) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    left = ports(vm, 8000)
    check("forward: agentd's listener on 169.254.0.21:8000 gone within seconds",
          not left, f"{left} after {time.monotonic() - t0:.1f} s")
    vm.sh("busybox httpd -p 127.0.0.1:8000 -h /tmp/www")
    took = wait(host, True, 10)
    check("forward: back once it starts again", took is not None and took < 5,
          f"after {took} s")
    stop(vm, 8000)
    # A service on 0.0.0.0 gets no second listener.
    vm.sh("busybox httpd -p 0.0.0.0:8001 -h /tmp/www")
    time.sleep(2.5)
    entries = ports(vm, 8001)
    check("forward: none for a service on 0.0.0.0",
          len(entries) == 1 and entries[0].get("forward") is None, repr(entries))
    check("forward: that service answers by itself",
          get(vm.host_port(8001)) == (200, b"hello-forward\n"))
    stop(vm, 8001)
