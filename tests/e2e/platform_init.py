"""platform_init.py -- envd's POST /init as the orchestrator sends it, on
the guest's own files and clock (tests/e2e/platform.py runs it): the CA
bundle installed, idempotent and rotated; events.e2b.local in /etc/hosts
and E2B_EVENTS_ADDRESS in a process's environment; the clock set from the
timestamp, and a stale /init ignored."""
import base64
import json
import struct
import time

from e2e import check

BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
EXTRA = "/usr/local/share/ca-certificates/e2b-ca.crt"


def pem(seed):
    body = base64.b64encode(seed.encode() * 12).decode()
    return ("-----BEGIN CERTIFICATE-----\n" + body +
            "\n-----END CERTIFICATE-----\n")


def init(vm, body):
    st, _, raw = vm.envd("POST", "/init", body)
    return st, raw


def run(vm, cmd):
    """A command through envd's process.Process/Start: its stdout."""
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}})
    st, _, raw = vm.envd("POST", "/process.Process/Start",
                         struct.pack(">BI", 0, len(msg)) + msg.encode(),
                         {"Content-Type": "application/connect+json"})
    out = b""
    while len(raw) >= 5:
        flags, n = struct.unpack(">BI", raw[:5])
        m = json.loads(raw[5:5 + n])
        raw = raw[5 + n:]
        data = m.get("event", {}).get("data", {})
        if flags == 0 and "stdout" in data:
            out += base64.b64decode(data["stdout"])
    return out.decode()


def count(vm, needle, path):
    code, out = vm.sh(f"grep -c -F -e '{needle}' {path}")
    return int(out.split()[0]) if out.strip() else -1


def checks(vm):
    # --- the CA bundle: appended once, the same again is nothing, a new
    # one replaces it; the system's certificates stay.
    vm.sh(f"mkdir -p /etc/ssl/certs && printf 'SYSTEM-CERT\\n' >{BUNDLE}")
    a, b = pem("first-ca"), pem("second-ca")
    a_line, b_line = a.split("\n")[1], b.split("\n")[1]
    st, raw = init(vm, {"caBundle": a})
    check("init: caBundle installed (204)", st == 204, f"{st} {raw!r}")
    st, raw = init(vm, {"caBundle": a + "\n\n"})
    check("init: the same caBundle again (204)", st == 204, f"{st} {raw!r}")
    check("init: the bundle holds it once, the system's kept",
          count(vm, a_line, BUNDLE) == 1 and
          count(vm, "SYSTEM-CERT", BUNDLE) == 1,
          vm.sh(f"cat {BUNDLE}")[1])
    code, out = vm.sh(f"cat {EXTRA}")
    check("init: the extra certificate file", out == a, repr(out))
    st, raw = init(vm, {"caBundle": b})
    check("init: a rotated caBundle (204)", st == 204, f"{st} {raw!r}")
    check("init: rotated: the new one once, the old one gone",
          count(vm, b_line, BUNDLE) == 1 and count(vm, a_line, BUNDLE) == 0
          and count(vm, "SYSTEM-CERT", BUNDLE) == 1,
          vm.sh(f"cat {BUNDLE}")[1])
    st, raw = init(vm, {"caBundle": "-----BEGIN CERTIFICATE-----\nx"})
    check("init: bad PEM is 400", st == 400, f"{st} {raw!r}")

    # --- hyperloopIP: one events.e2b.local line, the others kept.
    vm.sh("printf '10.1.1.1 other.host\\n9.9.9.9 events.e2b.local alias\\n'"
          " >>/etc/hosts")
    for ip in ("10.9.8.7", "10.9.8.6", "10.9.8.6"):
        st, raw = init(vm, {"hyperloopIP": ip})
        check(f"init: hyperloopIP {ip} (204)", st == 204, f"{st} {raw!r}")
    code, hosts = vm.sh("cat /etc/hosts")
    check("init: /etc/hosts: events.e2b.local once, at the last address, "
          "the other lines and names kept",
          hosts.count("events.e2b.local") == 1 and
          "10.9.8.6\tevents.e2b.local" in hosts and
          "10.1.1.1 other.host" in hosts and "9.9.9.9 alias" in hosts,
          hosts)
    out = run(vm, "echo $E2B_EVENTS_ADDRESS")
    check("init: E2B_EVENTS_ADDRESS in a process's environment",
          out == "http://10.9.8.6\n", repr(out))
    st, _, raw = vm.envd("GET", "/envs")
    check("init: E2B_EVENTS_ADDRESS in GET /envs",
          st == 200 and json.loads(raw).get("E2B_EVENTS_ADDRESS") ==
          "http://10.9.8.6", f"{st} {raw!r}")
    st, raw = init(vm, {"hyperloopIP": "10.9.8"})
    check("init: a bad hyperloopIP is 400", st == 400, f"{st} {raw!r}")

    # --- the clock: an hour ahead moves the guest's date; a stale /init
    # (older than the newest seen) is answered 204 and ignored.
    ahead = int(time.time()) + 3600
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.250Z", time.gmtime(ahead))
    st, raw = init(vm, {"timestamp": ts, "envVars": {"FRESH": "1"}})
    check("init: timestamp an hour ahead (204)", st == 204, f"{st} {raw!r}")
    code, out = vm.sh("date +%s")
    check("init: the guest's clock moved an hour ahead",
          out.strip().isdigit() and abs(int(out) - ahead) < 30, out)
    stale = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ahead - 60))
    st, raw = init(vm, {"timestamp": stale, "envVars": {"STALE": "1"}})
    st2, _, envs = vm.envd("GET", "/envs")
    check("init: a stale /init is 204 and ignored",
          st == 204 and "STALE" not in json.loads(envs) and
          "FRESH" in json.loads(envs), f"{st} {envs!r}")
    code, out = vm.sh("date +%s")
    check("init: the stale /init left the clock",
          out.strip().isdigit() and abs(int(out) - ahead) < 30, out)
