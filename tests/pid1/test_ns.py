"""agentd as PID 1 of a PID namespace: reaping, clean children, exit codes."""

import re
import signal
import socket
import subprocess
import threading
import time

from pid1lib import Pid1TestCase, agentd_path, wait_for


def status_field(text, name):
    m = re.search(r'^%s:\s*([0-9a-fA-F]+)$' % name, text, re.M)
    return m.group(1) if m else None


class NamespaceTest(Pid1TestCase):

    def test_is_pid_1(self):
        a = self.start()
        self.assertEqual(a.health['pid'], 1)
        st, j = a.request('GET', '/healthz')
        self.assertEqual(st, 200)
        self.assertEqual(j['status'], 'ok')
        # Over TCP too.
        c = a.conn(tcp=True)
        c.request('GET', '/healthz')
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        c.close()
        code, out = a.run('echo $PPID')
        self.assertEqual((code, out.strip()), (0, b'1'))

    def test_forwarding_off_in_a_container(self):
        # PID 1 of a PID namespace that is not the initial one: a container,
        # whose network may be the host's (here it is): no forwarding of
        # the host's localhost services unless asked.
        a = self.start()
        st, j = a.request('GET', '/debug/stat')
        self.assertEqual(st, 200)
        self.assertEqual(j['forward'], {'enabled': False})
        b = self.start(['--forward-localhost', '1',
                        '--forward-address', '127.0.0.2'])
        st, j = b.request('GET', '/debug/stat')
        self.assertEqual(st, 200)
        self.assertTrue(j['forward']['enabled'])
        self.assertEqual(j['forward']['address'], '127.0.0.2')

    def test_100_orphans_leave_no_zombie(self):
        a = self.start()
        code, _ = a.run('for i in $(seq 100); do (sleep 0.2 &) ; done')
        self.assertEqual(code, 0)

        def settled():
            pids = a.ns_pids()
            zombies = [p for p, s in pids.items() if s == 'Z']
            return (not zombies and len(pids) == 1) and pids
        pids = wait_for(settled, 20, interval=0.1,
                        what='the orphans to be reaped')
        self.assertEqual(list(pids), [a.host_pid])
        self.assertGreaterEqual(
            a.metrics().get('agentd_zombies_reaped_total', 0), 100)
        # Seen from inside: no Z in the namespace's /proc either.
        code, out = a.run("cat /proc/[0-9]*/stat 2>/dev/null | "
                          "sed 's/.*) //' | cut -d' ' -f1 | grep -c Z")
        self.assertEqual(out.strip(), b'0')

    def test_orphan_of_a_running_session_is_reaped(self):
        a = self.start()
        # The orphan ends while its session still runs; the session waits
        # until the orphan is gone from /proc (kill -0 still finds a
        # zombie), which only PID 1's reaping does.
        j = a.create('(sleep 0.1 & echo $! > o.pid); o=$(cat o.pid); '
                     'while kill -0 $o 2>/dev/null; do sleep 0.05; done; '
                     'echo reaped', cwd=a.dir)
        a.read_until(j['id'], b'reaped', timeout=60)

    def test_signal_mask_and_dispositions_are_clean(self):
        a = self.start()
        for tty in (False, True):
            code, out = a.run('cat /proc/self/status', tty=tty)
            text = out.decode().replace('\r', '')
            self.assertEqual(code, 0)
            for field in ('SigBlk', 'SigIgn'):
                v = status_field(text, field)
                self.assertIsNotNone(v, text)
                self.assertEqual(int(v, 16), 0, '%s %s (tty %s)'
                                 % (field, v, tty))
            self.assertEqual(int(status_field(text, 'SigPnd'), 16), 0)

    def test_only_fds_0_to_2(self):
        a = self.start()
        for tty in (False, True):
            code, out = a.run('ls /proc/self/fd', tty=tty)
            self.assertEqual(code, 0)
            self.assertEqual(sorted(out.split()), [b'0', b'1', b'2', b'3'],
                             'tty %s' % tty)

    def test_own_session_and_group(self):
        a = self.start()
        code, out = a.run('cut -d" " -f1,5,6 /proc/self/stat; '
                          'echo $$; cut -d" " -f5,6 /proc/$$/stat')
        lines = out.split(b'\n')
        sh = lines[1].strip()
        # The shell leads its own group and session.
        self.assertEqual(lines[2].split(), [sh, sh])

    def test_sigpipe_is_default(self):
        a = self.start()
        t0 = time.monotonic()
        code, out = a.run('yes | head -1', timeout=20)
        self.assertEqual((code, out), (0, b'y\n'))
        self.assertLess(time.monotonic() - t0, 15)
        code, out = a.run('yes | head -1', tty=True, timeout=20)
        self.assertEqual(code, 0)
        self.assertEqual(out.replace(b'\r', b''), b'y\n')

    def test_40_concurrent_sessions_own_exit_codes(self):
        a = self.start()
        results = {}
        errors = []

        def one(i):
            try:
                results[i] = a.run('sleep 0.%d; exit %d' % (i % 3, i),
                                   timeout=60)[0]
            except Exception as e:          # reported below
                errors.append((i, e))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        self.assertEqual(errors, [])
        self.assertEqual(results, {i: i for i in range(40)})
        # Killed by a signal: 128 + N.
        code, _ = a.run('kill -KILL $$')
        self.assertEqual(code, 137)

    def test_sighup_and_usr1_do_not_stop_it(self):
        a = self.start()
        for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            a.send(sig)
        time.sleep(0.3)
        self.assertTrue(a.alive())
        self.assertEqual(a.request('GET', '/healthz')[0], 200)

    def test_fatal_error_exits_1_not_0(self):
        # A container's runtime reads PID 1's exit status: a fatal error
        # (here: the port is taken) must not look like a clean shutdown.
        taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            taken.bind(('127.0.0.1', 0))
            taken.listen(1)
            r = subprocess.run(
                ['unshare', '--pid', '--fork', '--kill-child', '--mount-proc',
                 agentd_path(), '--socket', '', '--listen',
                 '127.0.0.1:%d' % taken.getsockname()[1]],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, timeout=60)
        finally:
            taken.close()
        err = r.stderr.decode('utf-8', 'replace')
        self.assertIn('cannot listen', err)
        self.assertIn('exiting 1 (PID 1 of a container)', err)
        self.assertEqual(r.returncode, 1, err)
