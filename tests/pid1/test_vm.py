"""agentd as the /init of a real VM (qemu, the machine's Debian kernel): the
NIC's modules loaded from /lib/modules (coldplug through modules.alias, and
every module of modules.dep without it), ip= applied, the token hidden from
/proc/cmdline and the kernel log (dmesg and /dev/kmsg), and the power-off
(or reboot) at the end.

Skips unless the binary is static (the initramfs has no libc), qemu, a
kernel in /boot with its modules, and a static busybox (the sessions' shell)
are there.  The VM is emulated (TCG): a boot takes some seconds, and only
CPU.  KVM is opt-in (AGENTD_VM_ACCEL=kvm): in a nested VM it can hang in the
guest's early boot (seen on the 2-core CI machine: no console output in two
minutes, while TCG booted in 6 s).  Bounds are generous: they test that each
step happens, not how fast; every wait is for an event the guest reports.
"""

import base64
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from pid1lib import agentd_path, free_port, wait_for

BOOT_TIMEOUT = 180.0    # s: boot to healthz, TCG on a loaded machine
STEP_TIMEOUT = 120.0    # s: one command in the guest, or its power-off
NIC_MODULES = ('virtio_pci', 'virtio_net')


def is_static(path):
    """No PT_INTERP: the binary needs no dynamic loader."""
    with open(path, 'rb') as f:
        data = f.read(1 << 20)
    return data[:4] == b'\x7fELF' and b'ld-linux' not in data and \
        b'/lib/ld-musl' not in data


def find_kernel():
    """(vmlinuz, release) of the newest kernel with modules, or None."""
    try:
        names = sorted(n for n in os.listdir('/boot')
                       if n.startswith('vmlinuz-'))
    except OSError:
        return None
    for n in reversed(names):
        rel = n[len('vmlinuz-'):]
        if os.path.exists('/lib/modules/%s/modules.dep' % rel) and \
                os.access('/boot/' + n, os.R_OK):
            return '/boot/' + n, rel
    return None


class Cpio:
    """A newc cpio archive, written in memory."""

    def __init__(self):
        self.data = bytearray()
        self.ino = 1000

    def add(self, name, mode, body=b'', rdev=(0, 0)):
        self.ino += 1
        nm = name.encode() + b'\0'
        hdr = b'070701' + b''.join(b'%08X' % v for v in (
            self.ino, mode, 0, 0, 1, 0, len(body), 0, 0, rdev[0], rdev[1],
            len(nm), 0))
        self.data += hdr + nm
        self.data += b'\0' * (-len(self.data) % 4)
        self.data += body
        self.data += b'\0' * (-len(self.data) % 4)

    def dir(self, name):
        self.add(name, 0o040755)

    def file(self, name, body, mode=0o100644):
        self.add(name, mode, body)

    def link(self, name, target):
        self.add(name, 0o120777, target.encode())

    def close(self):
        self.add('TRAILER!!!', 0)
        return bytes(self.data)


def module_closure(rel, names):
    """modules.dep lines of names and their dependencies, and the aliases."""
    root = '/lib/modules/%s' % rel
    deps = {}
    with open(root + '/modules.dep') as f:
        for line in f:
            path, _, rest = line.strip().partition(':')
            deps[path] = rest.split()
    byname = {}
    for path in deps:
        base = os.path.basename(path).split('.ko')[0].replace('-', '_')
        byname[base] = path
    want, todo = set(), [byname[n] for n in names if n in byname]
    if len(todo) != len(names):
        return None
    while todo:
        p = todo.pop()
        if p not in want:
            want.add(p)
            todo.extend(deps[p])
    modnames = {os.path.basename(p).split('.ko')[0].replace('-', '_')
                for p in want}
    aliases = []
    with open(root + '/modules.alias') as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == 'alias' and \
                    parts[2].replace('-', '_') in modnames:
                aliases.append(line)
    dep_text = ''.join('%s: %s\n' % (p, ' '.join(deps[p])) for p in sorted(want))
    return want, dep_text, ''.join(aliases)


class VmTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.agentd = agentd_path()
        if os.geteuid() != 0:
            raise unittest.SkipTest('needs root (the kernel image)')
        if not is_static(cls.agentd):
            raise unittest.SkipTest('%s is not static' % cls.agentd)
        cls.qemu = shutil.which('qemu-system-x86_64')
        if cls.qemu is None:
            raise unittest.SkipTest('no qemu-system-x86_64')
        k = find_kernel()
        if k is None:
            raise unittest.SkipTest('no kernel with modules in /boot')
        cls.kernel, cls.rel = k
        cls.busybox = shutil.which('busybox')
        if cls.busybox is None or not is_static(cls.busybox):
            raise unittest.SkipTest('no static busybox')
        if module_closure(cls.rel, NIC_MODULES) is None:
            raise unittest.SkipTest('no virtio_net module (built in?)')

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='agentd-vm-')
        self.qemu_proc = None

    def tearDown(self):
        if self.qemu_proc is not None and self.qemu_proc.poll() is None:
            self.qemu_proc.kill()
            self.qemu_proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def initramfs(self, aliases=True):
        want, dep_text, alias_text = module_closure(self.rel, NIC_MODULES)
        c = Cpio()
        for d in ('dev', 'proc', 'sys', 'run', 'tmp', 'bin', 'etc', 'lib',
                  'lib/modules'):
            c.dir(d)
        c.add('dev/console', 0o020600, rdev=(5, 1))
        c.add('dev/null', 0o020666, rdev=(1, 3))
        with open(self.agentd, 'rb') as f:
            c.file('init', f.read(), 0o100755)
        with open(self.busybox, 'rb') as f:
            c.file('bin/busybox', f.read(), 0o100755)
        for applet in ('sh', 'cat', 'ls', 'ip', 'hostname', 'dmesg', 'grep',
                       'tr', 'sleep', 'seq', 'kill', 'mount', 'sed', 'cut',
                       'head'):
            c.link('bin/' + applet, 'busybox')
        root = 'lib/modules/%s' % self.rel
        made = {'lib/modules'}
        for p in sorted(want):
            parts = (root + '/' + p).split('/')[:-1]
            for i in range(3, len(parts) + 1):
                d = '/'.join(parts[:i])
                if d not in made:
                    made.add(d)
                    c.dir(d)
            with open('/' + root + '/' + p, 'rb') as f:
                c.file(root + '/' + p, f.read())
        c.file(root + '/modules.dep', dep_text.encode())
        if aliases:
            c.file(root + '/modules.alias', alias_text.encode())
        path = os.path.join(self.dir, 'initrd.cpio')
        with open(path, 'wb') as f:
            f.write(c.close())
        return path

    def boot(self, append, aliases=True):
        self.port = free_port()
        self.serial = os.path.join(self.dir, 'serial.log')
        accel = os.environ.get('AGENTD_VM_ACCEL') or 'tcg'
        argv = [self.qemu, '-machine', 'q35', '-accel', accel, '-m', '512',
                '-smp', '1', '-nographic', '-no-reboot', '-nodefaults',
                '-serial', 'file:' + self.serial,
                '-kernel', self.kernel, '-initrd', self.initramfs(aliases),
                '-append', 'console=ttyS0 panic=-1 ' + append,
                '-netdev', 'user,id=n0,hostfwd=tcp:127.0.0.1:%d-:49984'
                % self.port, '-device', 'virtio-net-pci,netdev=n0']
        self.qemu_proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.STDOUT)

        def ready():
            if self.qemu_proc.poll() is not None:
                raise AssertionError('qemu ended:\n' + self.console())
            try:
                st, j = self.request('GET', '/healthz', timeout=3)
                return st == 200 and j
            except (OSError, http.client.HTTPException, ValueError):
                return None
        # Before the guest listens, connections hang: short timeouts.
        try:
            return wait_for(ready, BOOT_TIMEOUT, interval=0.5,
                            what='healthz from the VM')
        except AssertionError as e:
            raise AssertionError('%s\n%s' % (e, self.console()))

    def console(self):
        try:
            with open(self.serial, 'rb') as f:
                return f.read().decode('utf-8', 'replace')[-6000:]
        except OSError:
            return ''

    def request(self, method, path, body=None, token=None, timeout=60):
        c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout)
        try:
            h = {'Authorization': 'Bearer ' + token} if token else {}
            c.request(method, path, json.dumps(body) if body else None, h)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def run_cmd(self, cmd, token=None):
        """Run cmd to its end (however long the guest takes, up to
        STEP_TIMEOUT); (exit_code, stdout text).  stderr is kept apart: the
        two pipes' chunks arrive in no guaranteed order."""
        st, j = self.request('POST', '/v1/sessions',
                             {'cmd': cmd, 'yield_ms': 10000}, token=token)
        self.assertEqual(st, 201, j)
        sid, out, err = j['id'], b'', b''
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            for c in j['output']:
                if c['stream'] == 'stderr':
                    err += base64.b64decode(c['data'])
                else:
                    out += base64.b64decode(c['data'])
            if j['state'] == 'exited' and j['eof']:
                break
            if time.monotonic() > deadline:
                raise AssertionError('%r still %s after %.0f s: %r %r'
                                     % (cmd, j['state'], STEP_TIMEOUT, out,
                                        err))
            st, j = self.request('GET', '/v1/sessions/%s?cursor=%d&wait_ms='
                                 '5000' % (sid, j['cursor']), token=token)
            self.assertEqual(st, 200, j)
        return j['exit_code'], out.decode()

    def read_until(self, sid, needle, token=None):
        """Wait (up to STEP_TIMEOUT) for needle in a session's output."""
        cursor, out = 0, b''
        deadline = time.monotonic() + STEP_TIMEOUT
        while needle not in out:
            if time.monotonic() > deadline:
                raise AssertionError('no %r from %s in %.0f s: %r'
                                     % (needle, sid, STEP_TIMEOUT, out))
            st, j = self.request('GET', '/v1/sessions/%s?cursor=%d&wait_ms='
                                 '5000' % (sid, cursor), token=token)
            self.assertEqual(st, 200, j)
            out += b''.join(base64.b64decode(c['data']) for c in j['output'])
            cursor = j['cursor']

    def pin_answers(self):
        """30 clients ask for a 16 MiB window and never read it (issue 26.2:
        as PID 1 of a 512 MiB guest this took the kernel down): past
        --max-answer-bytes they get 503 too_busy, and the machine lives."""
        st, j = self.request('POST', '/v1/sessions', {
            'cmd': "head -c 16777216 /dev/zero | tr '\\0' a",
            'ring_bytes': 16 << 20, 'max_bytes': 0})
        self.assertEqual(st, 201, j)
        deadline = time.monotonic() + STEP_TIMEOUT
        while j['state'] != 'exited' and time.monotonic() < deadline:
            st, j = self.request('GET', '/v1/sessions/%s?max_bytes=0&'
                                 'cursor=%d&wait_ms=5000' % (j['id'],
                                                            j['last_chunk']))
        self.assertEqual(j['state'], 'exited')
        head = ('GET /v1/sessions/%s?max_bytes=%d HTTP/1.1\r\n'
                'Host: 127.0.0.1\r\n\r\n' % (j['id'], 16 << 20)).encode()
        socks, statuses = [], []
        try:
            for _ in range(30):
                k = socket.create_connection(('127.0.0.1', self.port), 30)
                k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                k.sendall(head)
                socks.append(k)
            for k in socks:
                statuses.append(k.recv(12)[9:12])
            st, h = self.request('GET', '/healthz', timeout=STEP_TIMEOUT)
            self.assertEqual(st, 200)
            code, out = self.run_cmd('echo alive')
            self.assertEqual(out, 'alive\n')
        finally:
            for k in socks:
                k.close()
        self.assertIn(b'200', statuses)
        self.assertIn(b'503', statuses)
        self.assertNotIn('Out of memory', self.console())

    def wait_qemu_end(self, timeout):
        try:
            self.qemu_proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError('the VM did not end within %.0f s:\n%s'
                                 % (timeout, self.console()))

    def test_vm_init_ip_token_poweroff(self):
        token = 'vmtok%dsecret' % os.getpid()
        h = self.boot('ip=10.0.2.15::10.0.2.2:255.255.255.0:vmhost:eth0:off '
                      'agentd.token=%s agentd.shutdown-grace=3000' % token)
        self.assertEqual(h['pid'], 1)
        st, _ = self.request('GET', '/v1/sessions')
        self.assertEqual(st, 401)
        code, out = self.run_cmd(
            'cat /proc/cmdline; hostname; ip -4 addr show eth0; ip route; '
            'dmesg | grep -c %s; tr "\\0" "\\n" < /proc/1/environ | '
            'grep -c %s; (cat /dev/kmsg & k=$!; sleep 1; kill $k) | '
            'grep -c %s; grep -E "^Sig(Blk|Ign)" /proc/self/status; '
            'ls /proc/self/fd | tr "\\n" " "' % (token, token, token),
            token=token)
        self.assertNotIn(token, out)
        lines = out.split('\n')
        self.assertIn('ip=10.0.2.15::10.0.2.2:255.255.255.0:vmhost:eth0:off',
                      lines[0])
        self.assertEqual(lines[1], 'vmhost')
        self.assertIn('inet 10.0.2.15/24', out)
        self.assertIn('default via 10.0.2.2 dev eth0', out)
        self.assertIn('\n0\n0\n0\n', out,
                      'the token in dmesg, environ or /dev/kmsg')
        self.assertIn('SigBlk:\t0000000000000000', out)
        self.assertIn('SigIgn:\t0000000000000000', out)
        self.assertEqual(lines[-1].split(), ['0', '1', '2', '3'])
        # The real init reaps orphans: every sleep, zombie or not, is
        # still in /proc until PID 1 reaps it.  Wait for them all to go
        # (a zombie counted at one instant may just be between its exit and
        # its reaping), then no zombie may be left.
        code, out = self.run_cmd(
            'for i in $(seq 50); do (sleep 0.2 &); done; n=0; '
            'while cat /proc/[0-9]*/stat 2>/dev/null | grep -q "(sleep)"; '
            'do n=$((n+1)); [ $n -lt 1000 ] || break; sleep 0.1; done; '
            'cat /proc/[0-9]*/stat 2>/dev/null | grep -c "(sleep)"; '
            'cat /proc/[0-9]*/stat 2>/dev/null | cut -d" " -f3 | grep -c Z',
            token=token)
        self.assertEqual(out.split(), ['0', '0'])
        # A session that traps SIGTERM sees it; then the machine powers off.
        st, j = self.request('POST', '/v1/sessions', {
            'cmd': "trap 'echo got-term > /dev/console; exit 0' TERM; "
                   "echo r; while :; do sleep 0.1; done"}, token=token)
        self.assertEqual(st, 201)
        # Only once the trap is set: before, SIGTERM just ends the shell.
        self.read_until(j['id'], b'r\n', token=token)
        self.request('POST', '/v1/sessions', {'cmd': 'kill -TERM 1'},
                     token=token)
        self.wait_qemu_end(3 + STEP_TIMEOUT)
        con = self.console()
        self.assertIn('got-term', con)
        self.assertIn('pid1_poweroff: powering off', con)
        self.assertIn('modules loaded', con)
        self.assertNotIn('Kernel panic', con)

    def test_vm_without_modules_alias_and_reboot(self):
        h = self.boot('ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off '
                      'agentd.shutdown=reboot', aliases=False)
        self.assertEqual(h['pid'], 1)
        code, out = self.run_cmd('ip -4 addr show eth0')
        self.assertIn('inet 10.0.2.15/24', out)
        # Links are protected, as a distribution's sysctl.d would have it.
        code, out = self.run_cmd('cat /proc/sys/fs/protected_hardlinks '
                                 '/proc/sys/fs/protected_symlinks')
        self.assertEqual(out.split(), ['1', '1'])
        self.pin_answers()
        self.request('POST', '/v1/sessions', {'cmd': 'kill -INT 1'})
        self.wait_qemu_end(STEP_TIMEOUT)
        con = self.console()
        self.assertIn('pid1_poweroff: rebooting', con)
        self.assertIn('ctrl-alt-del', con)
        self.assertNotIn('Kernel panic', con)
