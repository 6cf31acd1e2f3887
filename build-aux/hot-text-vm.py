#!/usr/bin/python3
"""build-aux/hot-text-vm.py INITRAMFS OUT -- agentd's page faults as a VM's
PID 1, for build-aux/hot-text.sh.

Boots INITRAMFS in qemu (tests/e2e's boot) with the kernel's
exceptions:page_fault_user tracepoint on from the command line, asks
/healthz, and writes to OUT /init's mappings ("# maps") and PID 1's user
faults, "IP ADDRESS" a line ("# faults"), read from tracefs in the guest.
The start of a bare VM's init (mounts, modules, ip=, cgroups) runs code
the host's idle start never does.
"""
import os
import secrets
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "e2e"))
import e2e  # noqa: E402

FAULTS = ("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; "
          "echo 0 > /sys/kernel/tracing/tracing_on; "
          "grep -E '^ *init-1 ' /sys/kernel/tracing/trace | sed -n "
          "'s/.*address=\\(0x[0-9a-f]*\\) *ip=\\(0x[0-9a-f]*\\).*/\\2 \\1/p'")


def main():
    initrd, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    # The kernel is extracted beside OUT, once for every round.
    workdir = os.path.join(os.path.dirname(os.path.abspath(out)), "vm")
    os.makedirs(workdir, exist_ok=True)
    kernel = e2e.kernel_path(e2e.initramfs_kver(initrd), workdir)
    agent = e2e.Agent(e2e.free_port(), secrets.token_hex(16))
    proc, _ = e2e.boot(kernel, initrd, agent.port, agent.token, workdir,
                       os.path.join(workdir, "monitor.sock"),
                       append_extra="trace_event=exceptions:page_fault_user "
                                    "trace_buf_size=4M")

    def sh(cmd):
        st, doc = agent.run({"cmd": cmd, "yield_ms": 30000, "timeout_ms": 30000},
                            timeout=60)
        if st not in (200, 201) or not isinstance(doc, dict):
            raise SystemExit(f"hot-text-vm.py: {cmd!r}: {st} {doc}")
        return doc.get("text", "")

    try:
        health, secs = e2e.wait_healthz(agent, proc, 120)
        if health is None:
            raise SystemExit("hot-text-vm.py: the VM did not answer /healthz")
        for _ in range(3):
            agent.request("GET", "/healthz", auth=False)
        time.sleep(2)
        rss = sh("grep VmRSS /proc/1/status").split()
        maps = sh("cat /proc/1/maps")
        faults = sh(FAULTS)
    finally:
        proc.kill()
        proc.wait()
    with open(out, "w") as f:
        f.write("# maps\n" + maps + "\n# faults\n" + faults)
    print(" ".join(rss[1:3]))


if __name__ == "__main__":
    main()
