"""platform_init.py -- envd's POST /init as the orchestrator sends it, on
the guest's own files and clock (tests/e2e/envd_platform.py runs it): the CA
bundle installed, idempotent and rotated; events.e2b.local in /etc/hosts
and E2B_EVENTS_ADDRESS in a process's environment; the clock set from the
timestamp, and a stale /init ignored; an NFSv3 volume mounted from a real
server (nfs-ganesha on the host), left on the same lifecycle, remounted on
a new one."""
import base64
import json
import os
import struct
import time

from e2e import check, log

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
    nfs_checks(vm)
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
    # A bind-mounted /etc/hosts (a container's) cannot be renamed over:
    # it is written in place.
    vm.sh("cp /etc/hosts /tmp/hosts.bind && mount --bind /tmp/hosts.bind "
          "/etc/hosts")
    st, raw = init(vm, {"hyperloopIP": "10.9.8.5"})
    code, hosts = vm.sh("cat /etc/hosts")
    vm.sh("umount /etc/hosts")
    check("init: a bind-mounted /etc/hosts is written in place",
          st == 204 and "10.9.8.5\tevents.e2b.local" in hosts and
          hosts.count("events.e2b.local") == 1, f"{st} {raw!r} {hosts}")

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


# --- volumeMounts: a real NFSv3 server, nfs-ganesha, run as a plain
# process in a network namespace of its own (with its own rpcbind, which
# ganesha registers with), so that nothing listens on the host but this
# test's forwarder on 127.0.0.1:2049 (MOUNT and NFS, as E2B's proxy); qemu's user network takes the guest's
# connections to the host address 169.254.0.22 to the host's 127.0.0.1.
GANESHA_CONF = """NFS_CORE_PARAM {
	Protocols = 3; NFS_Port = 2049; MNT_Port = 20048;
	Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1; Path = %s; Pseudo = /export; Protocols = 3;
	Transports = TCP; Access_Type = RW; Squash = No_Root_Squash;
	FSAL { Name = VFS; }
}
"""
SERVER_SH = """ip link set lo up || exit 1
mount -t tmpfs tmpfs /run || exit 1
mkdir -p /run/rpcbind || exit 1
rpcbind -w -f &
echo $! >"$3"
exec ganesha.nfsd -F -f "$1" -L "$2" -p /run/ganesha.pid -N NIV_EVENT
"""


class NfsServer:
    """ganesha in its own network namespace, 127.0.0.1:2049 forwarded to
    it from the host's 127.0.0.1:2049 (threads that enter its namespace
    with setns(2) to connect)."""

    def __init__(self):
        import ctypes
        import socket
        import subprocess
        import tempfile
        import threading
        self.dir = tempfile.mkdtemp(prefix="agentd-nfs-")
        self.export = os.path.join(self.dir, "export")
        os.mkdir(self.export)
        conf = os.path.join(self.dir, "ganesha.conf")
        with open(conf, "w") as f:
            f.write(GANESHA_CONF % self.export)
        self.log = os.path.join(self.dir, "ganesha.log")
        self.rpcbind_pid = os.path.join(self.dir, "rpcbind.pid")
        self.proc = subprocess.Popen(
            ["unshare", "-nm", "--propagation", "private", "sh", "-c",
             SERVER_SH, "sh", conf, self.log, self.rpcbind_pid],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.netns = f"/proc/{self.proc.pid}/ns/net"
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 2049))
        self.lsock.listen(16)
        self.socket, self.threading = socket, threading
        self.stopping = False
        self.blackhole, self.held = False, []
        threading.Thread(target=self.accept, daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(self.log) and "Cannot register" not in \
                    open(self.log).read() and self.probe():
                return
            time.sleep(0.3)
        tail = self.tail()
        self.stop()
        raise OSError("ganesha did not start: " + tail)

    def tail(self):
        try:
            return open(self.log).read()[-1500:]
        except OSError as e:
            return repr(e)

    def inner(self, port=2049):
        """A socket connected to ganesha inside its namespace."""
        fd = os.open(self.netns, os.O_RDONLY)
        try:
            if self.libc.setns(fd, 0x40000000) != 0:     # CLONE_NEWNET
                raise OSError("setns failed")
            return self.socket.create_connection(("127.0.0.1", port), 5)
        finally:
            os.close(fd)

    def probe(self):
        result = []
        t = self.threading.Thread(target=lambda: result.append(
            self.try_inner()))
        t.start()
        t.join()
        return result[0]

    def try_inner(self):
        try:
            self.inner().close()
            return True
        except OSError:
            return False

    def accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            self.threading.Thread(target=self.pipe, args=(c,),
                                  daemon=True).start()

    def pipe(self, c):
        if self.blackhole:          # a server that never answers
            self.held.append(c)
            return
        # E2B's NFS proxy serves MOUNT and NFS both on 2049, as envd's
        # options say (mountport=2049): the first call's RPC program picks
        # ganesha's port (record mark, xid, type, rpcvers, then prog).
        try:
            head = c.recv(20, self.socket.MSG_PEEK | self.socket.MSG_WAITALL)
            prog = struct.unpack(">I", head[16:20])[0] if len(head) == 20 \
                else 0
            # this thread is in ganesha's namespace from here on
            s = self.inner(20048 if prog == 100005 else 2049)
        except OSError:
            c.close()
            return

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(self.socket.SHUT_RDWR)
                except OSError:
                    pass
        self.threading.Thread(target=pump, args=(s, c), daemon=True).start()
        pump(c, s)

    def stop(self):
        import shutil
        self.stopping = True
        self.lsock.close()
        for c in self.held:
            c.close()
        self.proc.terminate()      # ganesha (unshare and sh exec it)
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        try:
            with open(self.rpcbind_pid) as f:
                os.kill(int(f.read()), 15)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def mounts_at(vm, path):
    """The types of what is mounted at path (/proc/self/mountinfo)."""
    code, out = vm.sh(f"awk '$5 == \"{path}\" {{ for (i = 7; i <= NF; i++) "
                      "if ($i == \"-\") print $(i + 1) }' /proc/self/mountinfo")
    return out.split()


def mount_age(vm, path):
    """Seconds since the NFS mount at path was made (mountstats' age)."""
    code, out = vm.sh(f"awk '/ mounted on {path.replace('/', chr(92) + '/')} "
                      "/ { f = 1 } f && $1 == \"age:\" { print $2; exit }' "
                      "/proc/self/mountstats")
    return int(out) if out.strip().isdigit() else -1


def nfs_checks(vm):
    import shutil
    if shutil.which("ganesha.nfsd") is None:
        log("SKIP nfs: nfs-ganesha is missing (build-aux/deps.sh e2e)")
        return
    srv = NfsServer()
    try:
        target = "169.254.0.22:" + srv.export
        with open(os.path.join(srv.export, "from-host"), "w") as f:
            f.write("host\n")
        t0 = time.monotonic()
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/vol"}],
            "lifecycleID": "life-1"})
        check("nfs: /init mounts it (204)", st == 204,
              f"{st} {raw!r} after {time.monotonic() - t0:.1f}s; "
              + srv.tail())
        first = mounts_at(vm, "/mnt/vol")
        check("nfs: an nfs mount at /mnt/vol", first == ["nfs"], f"{first}")
        code, out = vm.sh("cat /mnt/vol/from-host && echo guest "
                          ">/mnt/vol/from-guest")
        check("nfs: the server's file read, one written",
              code == 0 and out == "host\n" and open(os.path.join(
                  srv.export, "from-guest")).read() == "guest\n", out)
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/vol"}],
            "lifecycleID": "life-1"})
        time.sleep(2.2)
        age = mount_age(vm, "/mnt/vol")
        check("nfs: the same lifecycle: left as it is",
              st == 204 and age >= 2, f"{st} {raw!r} age {age}")
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/vol"}],
            "lifecycleID": "life-2"})
        again, age = mounts_at(vm, "/mnt/vol"), mount_age(vm, "/mnt/vol")
        check("nfs: a new lifecycle: remounted, once",
              st == 204 and again == ["nfs"] and 0 <= age < 2,
              f"{st} {raw!r} {again} age {age}")
        code, out = vm.sh("cat /mnt/vol/from-guest")
        check("nfs: the remount reads the share", out == "guest\n", out)
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": "169.254.0.22:/no/such/export",
             "path": "/mnt/bad"}]})
        check("nfs: a mount that fails is 400 with the cause",
              st == 400 and b"failed to setup NFS volumes" in raw,
              f"{st} {raw!r}")
        # A server that takes the connection and never answers: envd's
        # 10 s, then 400; the mount's process killed and reaped.
        srv.blackhole = True
        t0 = time.monotonic()
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/hang"}],
            "lifecycleID": "life-3"})
        took = time.monotonic() - t0
        srv.blackhole = False
        check("nfs: a server that does not answer: 400 after 10 s",
              st == 400 and b"deadline" in raw and 9.5 < took < 15,
              f"{st} {raw!r} after {took:.1f}s")
        time.sleep(0.5)
        code, ps = vm.sh("ps -o pid,stat,comm | awk '$2 ~ /Z/' | wc -l")
        check("nfs: no process left behind", ps.strip() == "0", ps)
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": "nfs.example:/x", "path": "/mnt/x"}]})
        check("nfs: a target that is no address is 400", st == 400,
              f"{st} {raw!r}")
        # A user's symlink on the way never points the mount (or an
        # unmount) elsewhere; a mount that is not ours is never taken off.
        vm.sh("mkdir -p /tmp/aim /mnt/own && ln -sfn /tmp/aim /mnt/link && "
              "mount -t tmpfs own /mnt/own")
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/link/v"}],
            "lifecycleID": "life-4"})
        check("nfs: a symlink on the way is refused, nothing mounted",
              st == 400 and mounts_at(vm, "/tmp/aim/v") == [] and
              mounts_at(vm, "/tmp/aim") == [], f"{st} {raw!r}")
        st, raw = init(vm, {"volumeMounts": [
            {"nfs_target": target, "path": "/mnt/own"}],
            "lifecycleID": "life-4"})
        own = mounts_at(vm, "/mnt/own")
        check("nfs: another's mount at the path is left under ours",
              st == 204 and own == ["tmpfs", "nfs"], f"{st} {raw!r} {own}")
        vm.sh("umount /mnt/own; umount /mnt/own")
    finally:
        vm.sh("umount /mnt/vol || umount -l /mnt/vol")  # before its server goes
        srv.stop()
