#!/usr/bin/python3
"""tests/e2e/envd_platform.py -- envd's platform side (issue 39) with agentd as the
init of a VM addressed as E2B addresses its sandboxes.

Boots the initramfs like e2e.py (its helpers, imported), the guest at
169.254.0.21/24 (E2B's guest address; qemu's user network at 169.254.0.0/24,
the host side 169.254.0.22), agentd's token on the kernel command line and
envd's protocol on 0.0.0.0:49983 (agentd.envd-listen=), forwarded from the
host together with agentd's own 49984 and the guest ports GUEST_PORTS (for
services the checks start in the guest).  Then it runs the checks of every
tests/e2e/platform_*.py module: each has `checks(vm)` and uses the Vm below.
Ctrl-Alt-Del at the end: the VM powers off by itself, with no panic.

Environment: as e2e.py (INITRAMFS, AGENTD, KERNEL, QEMU, E2E_DIR,
E2E_BOOT_TIMEOUT), and PLATFORM_ONLY=NAME[,NAME] to run only the modules
platform_NAME.py.
Exit status: 0 all passed, 1 a check failed, 77 skipped.
"""
import fcntl
import glob
import http.client
import importlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e                                  # noqa: E402
from e2e import check, log                  # noqa: E402

GUEST_IP = "169.254.0.21"
HOST_IP = "169.254.0.22"
IP_ARG = f"ip={GUEST_IP}::{HOST_IP}:255.255.255.0::eth0:off"
NET_OPTS = f",net=169.254.0.0/24,host={HOST_IP},dns=169.254.0.23,dhcpstart=169.254.0.100"
ENVD_PORT = 49983
GUEST_PORTS = (8000, 8001, 8002, 8003)      # forwarded for the checks' services


class Vm:
    """The booted guest, as the checks see it."""

    def __init__(self, agent, envd_port, fwds, monitor, console):
        self.agent = agent                  # agentd's own API (e2e.Agent)
        self.token = agent.token
        self.envd_port = envd_port          # the host's end of 49983
        self.fwd = dict((g, h) for h, g in fwds)  # guest port -> host port
        self.monitor = monitor
        self.console = console

    def envd(self, method, path, body=None, headers=None, token=True,
             timeout=30):
        """One request to envd's listener: (status, headers, raw bytes).
        A dict or list body goes as JSON."""
        h = dict(headers or {})
        if token:
            h["X-Access-Token"] = self.token
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c = http.client.HTTPConnection("127.0.0.1", self.envd_port,
                                       timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.headers, r.read()
        finally:
            c.close()

    def sh(self, cmd, timeout=60):
        """Run cmd with the guest's /bin/sh through agentd's API: (exit code,
        output text)."""
        st, doc = self.agent.run({"cmd": cmd, "yield_ms": timeout * 1000,
                                  "timeout_ms": timeout * 1000},
                                 timeout=timeout + 30)
        if st != 201 and st != 200:
            return None, f"POST /v1/sessions: {st} {doc}"
        return doc.get("exit_code"), doc.get("text", "")

    def host_port(self, guest_port):
        """The host port forwarded to guest_port (one of GUEST_PORTS)."""
        return self.fwd[guest_port]


def modules():
    only = [n for n in os.environ.get("PLATFORM_ONLY", "").split(",") if n]
    names = sorted(os.path.basename(p)[len("platform_"):-3]
                   for p in glob.glob(os.path.join(HERE, "platform_*.py")))
    return [n for n in names if not only or n in only]


def main():
    qemu = shutil.which(os.environ.get("QEMU", "qemu-system-x86_64"))
    if not qemu:
        e2e.skip("qemu-system-x86_64 is missing: build-aux/deps.sh e2e")
    names = modules()
    if not names:
        e2e.skip("no tests/e2e/platform_*.py module selected")
    initrd = os.path.abspath(os.environ.get("INITRAMFS") or
                             os.path.join(e2e.ROOT, "build-static", "initramfs.cpio.gz"))
    workdir = os.environ.get("E2E_DIR") or os.path.join(os.path.dirname(initrd),
                                                        "e2e-platform")
    os.makedirs(workdir, exist_ok=True)
    lock = open(os.path.join(workdir, "lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    e2e.initramfs_path(initrd)
    kernel = e2e.kernel_path(e2e.initramfs_kver(initrd), workdir)
    port, envd_port = e2e.free_port(), e2e.free_port()
    fwds = [(envd_port, ENVD_PORT)] + [(e2e.free_port(), g) for g in GUEST_PORTS]
    agent = e2e.Agent(port, secrets.token_hex(16))
    sockdir = tempfile.mkdtemp(prefix="agentd-platform-")
    monitor = os.path.join(sockdir, "monitor.sock")
    proc, console = e2e.boot(kernel, initrd, port, agent.token, workdir, monitor,
                             append_extra=f"agentd.envd-listen=0.0.0.0:{ENVD_PORT}",
                             ip_arg=IP_ARG, net_opts=NET_OPTS, fwds=fwds,
                             guest_ip=GUEST_IP)
    try:
        health, secs = e2e.wait_healthz(agent, proc,
                                        float(os.environ.get("E2E_BOOT_TIMEOUT", "120")))
        if not check("boot: healthz 200, pid 1", health is not None and
                     health.get("pid") == 1, f"{health} after {secs:.1f}s"):
            e2e.dump_console(console)
            return 1
        log(f"boot: {secs:.1f} s, guest {GUEST_IP}")
        vm = Vm(agent, envd_port, fwds, monitor, console)
        code, out = vm.sh("ip -4 addr show eth0 2>/dev/null || ifconfig eth0")
        check("the guest is at E2B's address", GUEST_IP in out, out)
        for name in names:
            mod = importlib.import_module("platform_" + name)
            log(f"---- platform_{name}")
            try:
                mod.checks(vm)
            except (OSError, http.client.HTTPException, ValueError, KeyError,
                    TypeError, AttributeError) as e:
                check(f"platform_{name}: the checks ran to the end", False, repr(e))
        e2e.monitor_cmd(monitor, "sendkey ctrl-alt-delete")
        try:
            rc = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            rc = None
        text = e2e.console_text(console)
        check("ctrl-alt-del: qemu exits by itself", rc is not None)
        check("console: no kernel panic", "Kernel panic" not in text)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(sockdir, ignore_errors=True)
    return e2e.verdict("platform", console)


if __name__ == "__main__":
    sys.exit(main())
