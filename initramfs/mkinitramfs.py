#!/usr/bin/python3
"""initramfs/mkinitramfs.py -- agentd as /init of a bare VM, in a newc cpio.

    mkinitramfs.py --agentd BIN --kver VERSION [--agentctl BIN] [--busybox BIN] [--web DIR]
                   [--moddir DIR] [--modules virtio_pci,virtio_net] --out FILE.cpio.gz

The archive holds, and nothing else:
  /init                       the static agentd
  /bin/agentctl               the static agentctl (--agentctl), for a person debugging
                              inside the VM (`agentctl ls`, `agentctl --vsock 1:PORT ls`)
  /usr/share/agentd/web/      the web terminal's page (--web: its regular files and
                              folders), which agentd serves at /term/ by default
  /bin/busybox                busybox-static, and a (relative) symlink to it for every applet
                              (`busybox --list-full`: /bin/sh, /bin/ls, /sbin/ip...;
                              not linuxrc nor init: agentd is the only init)
  /lib/modules/VERSION/       the kernel modules the virtio NIC needs (virtio_net,
                              virtio_pci (or --modules) and what modules.dep says they
                              need, those built into the kernel left out) and a modules.dep of
                              just those, one line per module, dependencies first:
                              loading the lines in order works
  /dev/console /dev/null      device nodes, so that PID 1 has a console before it
                              mounts devtmpfs
  /etc/passwd /etc/group      root and nobody
  /proc /sys /dev /run /tmp /root   empty directories

Written by this script, not by cpio(1): no root needed for the device nodes or the
owners (every entry is uid 0, gid 0), entries sorted, inodes numbered in order,
every mtime SOURCE_DATE_EPOCH (default 0), then `gzip -n -9`: the same inputs
give the same bytes.
"""
import argparse
import lzma
import os
import stat
import struct
import subprocess
import sys

# The NIC of the e2e boot (virtio-net-pci): what is loaded, dependencies added.
# --modules changes it (virtio_mmio,virtio_net for a Firecracker-style VMM).
DEFAULT_MODULES = "virtio_pci,virtio_net"
# busybox applets not linked: agentd is the init.
SKIP_APPLETS = {"linuxrc", "init"}

PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = b"root:x:0:\nnobody:x:65534:\n"


def die(msg):
    print("mkinitramfs: " + msg, file=sys.stderr)
    sys.exit(1)


def modname(path):
    base = os.path.basename(path)
    for ext in (".ko", ".ko.xz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base.replace("-", "_")


def read_module(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".ko.xz"):
        data = lzma.decompress(data)	# finit_module without flags wants ELF
    elif not path.endswith(".ko"):
        die(f"{path}: compressed modules other than xz are not handled")
    return data


def nic_modules(moddir, roots):
    """[(relative path in the archive, bytes, [dep paths])], dependencies first."""
    if not roots:
        return []
    deps = {}	# name -> (path, [dep paths]), as modules.dep says
    with open(os.path.join(moddir, "modules.dep")) as f:
        for line in f:
            if ":" not in line:
                continue
            path, rest = line.split(":", 1)
            deps[modname(path)] = (path.strip(), rest.split())
    builtin = set()
    try:
        with open(os.path.join(moddir, "modules.builtin")) as f:
            builtin = {modname(l.strip()) for l in f if l.strip()}
    except FileNotFoundError:
        pass
    order, seen = [], set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        if name in builtin:
            return
        if name not in deps:
            die(f"module {name} is neither in modules.dep nor built in ({moddir})")
        path, needs = deps[name]
        # modprobe loads a line's dependencies from the last to the first.
        for dep in reversed(needs):
            visit(modname(dep))
        order.append(name)

    for name in roots:
        visit(modname(name))
    out = []
    for name in order:
        path, needs = deps[name]
        rel = path[:-3] if path.endswith(".ko.xz") else path
        needs = [d[:-3] if d.endswith(".ko.xz") else d for d in needs]
        out.append((rel, read_module(os.path.join(moddir, path)), needs))
    return out


class Cpio:
    """A newc archive, written in memory; entries sorted at the end."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}	# path -> (mode, data, rdev)

    def add(self, path, mode, data=b"", rdev=(0, 0)):
        path = path.strip("/")
        if path in self.entries:
            die(f"{path}: twice in the archive")
        parent = os.path.dirname(path)
        if parent and parent not in self.entries:
            self.dir(parent)
        self.entries[path] = (mode, data, rdev)

    def dir(self, path, perm=0o755):
        path = path.strip("/")
        if path in self.entries:
            return
        self.add(path, stat.S_IFDIR | perm)

    def file(self, path, data, perm=0o644):
        self.add(path, stat.S_IFREG | perm, data)

    def symlink(self, path, target):
        self.add(path, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, path, major, minor, perm):
        self.add(path, stat.S_IFCHR | perm, rdev=(major, minor))

    @staticmethod
    def _pad(n):
        return b"\0" * (-n % 4)

    def _entry(self, ino, name, mode, data, rdev, nlink):
        bname = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, nlink, self.mtime, len(data), 0, 0,
                  rdev[0], rdev[1], len(bname), 0)
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        return hdr + bname + self._pad(len(hdr) + len(bname)) + data + self._pad(len(data))

    def bytes(self):
        # A directory's links: itself, its "." and each subdirectory's "..".
        nlink = {p: 2 if stat.S_ISDIR(e[0]) else 1 for p, e in self.entries.items()}
        for p, e in self.entries.items():
            if stat.S_ISDIR(e[0]) and os.path.dirname(p):
                nlink[os.path.dirname(p)] += 1
        out = []
        for ino, name in enumerate(sorted(self.entries), start=1):
            out.append(self._entry(ino, name, *self.entries[name], nlink[name]))
        out.append(self._entry(0, "TRAILER!!!", 0, b"", (0, 0), 1))
        return b"".join(out)


def busybox_applets(busybox):
    try:
        out = subprocess.run([busybox, "--list-full"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{busybox} --list-full: {e}")
    applets = sorted({l.strip().strip("/") for l in out.splitlines() if l.strip()})
    return [a for a in applets if os.path.basename(a) not in SKIP_APPLETS]


def is_static_elf(path):
    """An x86-64 ELF executable without a program interpreter (PT_INTERP)."""
    with open(path, "rb") as f:
        ehdr = f.read(64)
        if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", ehdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", ph, i * phentsize)[0] != 3 for i in range(phnum))


def add_tree(a, src, dst):
    """src's folders and regular files (symlinks followed) under dst, sorted."""
    if not os.path.isdir(src):
        die(f"{src}: not a folder")
    parts = dst.split("/")
    for i in range(1, len(parts) + 1):
        a.dir("/".join(parts[:i]))
    for top, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(top, src)
        here = dst if rel == "." else f"{dst}/{rel}"
        a.dir(here)
        for name in sorted(files):
            path = os.path.join(top, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    a.file(f"{here}/{name}", f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agentd", required=True, help="the static agentd binary")
    ap.add_argument("--kver", required=True, help="kernel version (uname -r)")
    ap.add_argument("--moddir", help="default /lib/modules/KVER")
    ap.add_argument("--agentctl", help="the static agentctl binary (/bin/agentctl)")
    ap.add_argument("--busybox", default="/bin/busybox", help="busybox-static")
    ap.add_argument("--modules", default=DEFAULT_MODULES,
                    help="comma-separated modules to ship, their dependencies added "
                    f"(default {DEFAULT_MODULES}; '' for none)")
    ap.add_argument("--web", help="the web terminal's page (/usr/share/agentd/web)")
    ap.add_argument("--out", required=True, help="the .cpio.gz to write")
    args = ap.parse_args()
    moddir = args.moddir or f"/lib/modules/{args.kver}"
    try:
        mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    except ValueError:
        die("SOURCE_DATE_EPOCH is not a number")

    for path in (args.agentd, args.busybox) + ((args.agentctl,) if args.agentctl else ()):
        if not os.path.isfile(path):
            die(f"{path}: missing")
        if not is_static_elf(path):
            die(f"{path}: not a static ELF binary (an initramfs has no libc)")

    a = Cpio(mtime)
    for d in ("dev", "proc", "sys", "run", "etc", "bin", "sbin", "usr/bin",
              "usr/sbin", "lib/modules"):
        a.dir(d)
    a.dir("tmp", 0o1777)
    a.dir("root", 0o700)
    a.chardev("dev/console", 5, 1, 0o600)
    a.chardev("dev/null", 1, 3, 0o666)
    a.file("etc/passwd", PASSWD)
    a.file("etc/group", GROUP)
    with open(args.agentd, "rb") as f:
        a.file("init", f.read(), 0o755)
    with open(args.busybox, "rb") as f:
        a.file("bin/busybox", f.read(), 0o755)
    if args.agentctl:
        with open(args.agentctl, "rb") as f:
            a.file("bin/agentctl", f.read(), 0o755)
    if args.web:
        add_tree(a, args.web, "usr/share/agentd/web")
    for applet in busybox_applets(args.busybox):
        if applet != "bin/busybox":
            a.symlink(applet, os.path.relpath("bin/busybox", os.path.dirname(applet)))

    kdir = f"lib/modules/{args.kver}"
    a.dir(kdir)
    dep_lines = []
    roots = [m for m in args.modules.split(",") if m.strip()]
    for rel, data, needs in nic_modules(moddir, roots):
        a.file(f"{kdir}/{rel}", data)
        dep_lines.append(f"{rel}: {' '.join(needs)}".rstrip() + "\n")
    a.file(f"{kdir}/modules.dep", "".join(dep_lines).encode())

    cpio = a.bytes()
    tmp = f"{args.out}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        subprocess.run(["gzip", "-n", "-9"], input=cpio, stdout=f, check=True)
    os.replace(tmp, args.out)
    print(f"mkinitramfs: {args.out}: {len(a.entries)} entries, "
          f"{len(cpio)} bytes cpio, {os.path.getsize(args.out)} gzipped; "
          f"modules: {', '.join(os.path.basename(l.split(':')[0]) for l in dep_lines)}")


if __name__ == "__main__":
    main()
