"""POST /v1/sandbox/upgrade: agentd replaces its binary in its own pid (a plain
process here; PID 1 in tests/e2e) under running and exited sessions and their
clients.

The new binary is a copy of the one under test: to_version equals
from_version (API.md, "Live upgrade").  A wrapper script that sleeps before
it execs the copy widens the hand-over, so that a session can exit and a
client can connect while no agentd runs in the pid.
"""

import hashlib
import os
import re
import shutil
import signal
import socket
import stat
import time
import unittest

from harness import AgentdTestCase, Background, WindowChecker, query

WRAPPER = '''#!/usr/bin/python3
# An upgrade's new binary that lingers before it becomes agentd (no fork:
# a shell would reap agentd's children while it waits).
import os, sys, time
if sys.argv[1:2] != ['--upgrade-check']:
    time.sleep(%(sleep)f)
os.execv(%(path)r, [%(path)r] + sys.argv[1:])
'''


class UpgradeTestCase(AgentdTestCase):

    def new_binary(self, name='agentd-next'):
        """A copy of agentd, mode 0755, in the test's directory."""
        path = os.path.join(self.agentd.dir, name)
        shutil.copyfile(self.agentd.binary, path)
        os.chmod(path, 0o755)
        return path

    def wrapper(self, sleep):
        real = self.new_binary('agentd-real')
        path = os.path.join(self.agentd.dir, 'agentd-slow')
        with open(path, 'w') as f:
            f.write(WRAPPER % {'sleep': sleep, 'path': real})
        os.chmod(path, 0o755)
        return path

    def upgrade(self, path, sha256=None, status=202):
        body = {'path': path}
        if sha256 is not None:
            body['sha256'] = sha256
        r = self.req('POST', '/v1/sandbox/upgrade', body)
        self.expect(r, status, 'upgrade %s' % path)
        return r

    def wait_upgraded(self, n, timeout=10.0):
        """Wait until /healthz says n upgrades; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            h = self.healthz()
            if h['upgrades'] == n:
                return h
            if time.monotonic() > deadline:
                self.fail('upgrades %d, not %d: %r' % (h['upgrades'], n, h))
            time.sleep(0.02)

    def events(self, **params):
        r = self.req('GET', '/v1/events' + query(**params))
        self.expect(r, 200, 'events')
        return r.json


class UpgradeTest(UpgradeTestCase):

    def test_sessions_survive(self):
        pid = self.healthz()['pid']
        self.assertEqual(self.healthz()['upgrades'], 0)
        # A pipe session that writes before, during and after the upgrade.
        flow = self.create(id='flow', cmd='for i in $(seq 1 40); do echo line $i; '
                           'echo err $i >&2; sleep 0.05; done; exit 3')
        done = self.create(id='done', cmd='echo finished; exit 5', yield_ms=5000)
        self.assertEqual(done['state'], 'exited')
        tty = self.create(id='tty', tty=True, argv=['/bin/sh'])
        cat = self.create(id='cat', cmd='cat', stdin=True)
        self.stdin('cat', text='before\n')
        ck = self.read_until('flow', b'line 5\n')
        cursor = ck.cursor
        created = self.events()
        self.upgrade(self.new_binary())
        h = self.wait_upgraded(1)
        self.assertEqual(h['pid'], pid)
        # The saved cursor reads on: nothing lost, nothing twice.
        ck = self.read_all('flow', checker=ck)
        self.assertGreaterEqual(ck.cursor, cursor)
        want_out = b''.join(b'line %d\n' % i for i in range(1, 41))
        want_err = b''.join(b'err %d\n' % i for i in range(1, 41))
        self.assertEqual(ck.streams().get('stdout'), want_out)
        self.assertEqual(ck.streams().get('stderr'), want_err)
        self.assertEqual(ck.last['exit_code'], 3)
        # The exited session is as it was.
        d = self.get('done', cursor=0)
        self.assertEqual(d['state'], 'exited')
        self.assertEqual(d['exit_code'], 5)
        ckd = self.read_all('done')
        self.assertEqual(ckd.data(), b'finished\n')
        # The tty shell is the same process; stdin, resize, signals work.
        t = self.get('tty')
        self.assertEqual(t['pid'], tty['pid'])
        self.assertEqual(t['state'], 'running')
        self.expect(self.resize_raw('tty', 33, 101), 200)
        self.stdin('tty', text='stty size; echo mark-$((6*7))\n')
        self.read_until('tty', b'mark-42', tty=True)
        ckt = self.read_until('tty', b'33 101', tty=True)
        self.assertIn(b'33 101', ckt.data())
        # stdin counts go on; the queue after the upgrade works.
        c = self.get('cat')
        self.assertEqual(c['stdin_bytes'], 7)
        self.stdin('cat', text='after\n', eof=True)
        ckc = self.read_all('cat')
        self.assertEqual(ckc.data(), b'before\nafter\n')
        self.expect(self.signal_raw('tty', 'SIGKILL'), 200)
        self.assertEqual(self.wait_state('tty')['signal'], 'SIGKILL')
        # The feed goes on with the same ids, and says so.
        ev = self.events()
        old = [e['id'] for e in created['events']]
        self.assertEqual([e['id'] for e in ev['events']][:len(old)], old)
        up = [e for e in ev['events'] if e['type'] == 'sandbox.upgraded']
        self.assertEqual(len(up), 1, ev)
        self.assertEqual(up[0]['from_version'], h['version'])
        self.assertEqual(up[0]['to_version'], h['version'])
        self.assertEqual(self.metric('agentd_upgrades_total'), 1)
        self.assertEqual(self.metric('agentd_upgrade_failures_total'), 0)

    def test_timers_across(self):
        # timeout_ms goes on with the time it had left.
        t0 = time.monotonic()
        self.create(id='slow', cmd='sleep 30', timeout_ms=1500)
        self.create(id='short', cmd='exit 0', yield_ms=5000)
        self.upgrade(self.new_binary())
        self.wait_upgraded(1)
        s = self.wait_state('slow', timeout=20)
        took = time.monotonic() - t0
        self.assertTrue(s['timed_out'], s)
        self.assertEqual(s['signal'], 'SIGTERM')
        self.assertGreater(took, 1.4)
        self.assertLess(took, 6.0)

    def test_ring_with_a_gap(self):
        # A small ring that evicted: the same chunks, ids, offsets and gap.
        self.create(id='big', cmd='seq 1 5000', ring_bytes=4096, yield_ms=5000)
        before = self.get('big', cursor=0)
        self.assertGreater(before['dropped_chunks'], 0)
        self.upgrade(self.new_binary())
        self.wait_upgraded(1)
        after = self.get('big', cursor=0)
        for k in ('output', 'cursor', 'dropped_chunks', 'more', 'eof',
                  'last_chunk', 'bytes_out', 'exit_code', 'state', 'pid'):
            self.assertEqual(after[k], before[k], k)

    def test_twice(self):
        pid = self.healthz()['pid']
        s = self.create(id='keep', cmd='sleep 30')
        self.upgrade(self.new_binary('a1'))
        self.wait_upgraded(1)
        self.upgrade(self.new_binary('a2'))
        h = self.wait_upgraded(2)
        self.assertEqual(h['pid'], pid)
        self.assertEqual(self.get('keep')['pid'], s['pid'])
        self.assertEqual(self.get('keep')['state'], 'running')
        self.assertEqual(self.metric('agentd_upgrades_total'), 2)
        # The old images and the rollback records are closed once the
        # new agentd took over: no session inherits them.
        links = [os.readlink('/proc/%d/fd/%s' % (pid, fd))
                 for fd in os.listdir('/proc/%d/fd' % pid)]
        self.assertFalse([l for l in links if 'agentd-rollback' in l or
                          'agentd-upgrade' in l or l.endswith(
                              ('/agentd', '/a1', '/a2'))], links)
        self.assertEqual(self.metric('agentd_upgrade_rollbacks_total'), 0)
        ev = self.events(types='sandbox.upgraded')
        self.assertEqual(len(ev['events']), 2)
        self.expect(self.delete('keep'), 200)

    def test_clients_across(self):
        import http.client
        from test_sse import SSEReader
        self.create(id='quiet', cmd='sleep 30')
        w = self.get('quiet')
        # Long-polls are answered with what they have, before the execve.
        polls = [Background(self.get_raw, 'quiet', cursor=w['cursor'], wait_ms=30000,
                            client=self.agentd.tcp_client()),
                 Background(lambda: self.req('GET', '/v1/events' + query(
                     cursor=self.events()['cursor'], wait_ms=30000),
                     client=self.agentd.tcp_client()))]
        stream = SSEReader(self, '/v1/events?types=session.created,sandbox.upgraded')
        first = stream.frame()
        self.assertEqual(first['event'], 'session.created')
        time.sleep(0.3)
        t0 = time.monotonic()
        self.upgrade(self.new_binary())
        self.assertEqual(polls[0].join_result(20).json['cursor'], w['cursor'])
        self.assertEqual(polls[1].join_result(20).status, 200)
        for p in polls:
            self.assertEqual(p.result.header('Connection'), 'close')
        for p in polls:
            self.assertLess(p.done_at - t0, 5.0)
        # The stream ends with the old agentd; it resumes by Last-Event-ID.
        try:
            while stream.frame() is not None:
                pass
        except (http.client.IncompleteRead, ConnectionError):
            pass
        stream.close()
        self.wait_upgraded(1)
        again = SSEReader(self, '/v1/events?types=session.created,sandbox.upgraded',
                          headers={'Last-Event-ID': first['id']})
        f = again.frame()
        self.assertEqual(f['event'], 'sandbox.upgraded')
        self.assertGreater(int(f['id']), int(first['id']))
        again.close()
        self.expect(self.delete('quiet'), 200)

    def test_exit_and_connect_during_handover(self):
        pid = self.healthz()['pid']
        self.create(id='quick', cmd='sleep 0.4; exit 7')
        t0 = time.monotonic()
        self.upgrade(self.wrapper(1.0))
        # agentd is a python script now: connects wait in the backlog.
        time.sleep(0.1)
        socks = []
        for _ in range(5):
            so = socket.create_connection(('127.0.0.1', self.agentd.port), timeout=30)
            so.sendall(b'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
            socks.append(so)
        for so in socks:
            data = b''
            while True:
                b = so.recv(65536)
                if not b:
                    break
                data += b
            so.close()
            self.assertTrue(data.startswith(b'HTTP/1.1 200'), data[:200])
            self.assertIn(b'"upgrades": 1', data)
        self.assertGreater(time.monotonic() - t0, 0.8)
        q = self.wait_state('quick')
        self.assertEqual(q['exit_code'], 7)
        self.assertEqual(self.healthz()['pid'], pid)
        ev = self.events(types='session.exited', session='quick')
        self.assertEqual(len(ev['events']), 1)
        self.assertEqual(ev['events'][0]['exit_code'], 7)


CORRUPT = '''#!/usr/bin/python3
# An upgrade's new binary that spoils the state before it becomes agentd.
import os, sys
if sys.argv[1:2] != ['--upgrade-check']:
    fd = int(os.environ['AGENTD_UPGRADE_STATE'])
    os.pwrite(fd, b'garbage', 40)
os.execv(%(path)r, [%(path)r] + sys.argv[1:])
'''

VANISH = '''#!/bin/sh
# Passes its check, then is gone: the execve fails.
rm -f "$0"
exec %(path)s "$@"
'''


class UpgradeFailureTest(UpgradeTestCase):

    def script(self, name, text):
        real = self.new_binary('agentd-real')
        path = os.path.join(self.agentd.dir, name)
        with open(path, 'w') as f:
            f.write(text % {'path': real})
        os.chmod(path, 0o755)
        return path

    def test_execve_fails(self):
        pid = self.healthz()['pid']
        s = self.create(id='stay', cmd='sleep 30')
        self.upgrade(self.script('vanish', VANISH))
        deadline = time.monotonic() + 10
        while self.metric('agentd_upgrade_failures_total') < 1:
            self.assertLess(time.monotonic(), deadline, 'no failure counted')
            time.sleep(0.05)
        h = self.healthz()
        self.assertEqual((h['pid'], h['upgrades']), (pid, 0))
        self.assertEqual(self.get('stay')['pid'], s['pid'])
        self.assertEqual(self.get('stay')['state'], 'running')
        # Accepting again, on every listener.
        self.assertEqual(self.healthz(client=self.agentd.tcp_client())['pid'], pid)
        self.assertEqual(self.healthz(client=self.agentd.unix_client())['pid'], pid)
        self.assertIn('carrying on', self.agentd.stderr())
        self.expect(self.delete('stay'), 200)

    def test_state_refused(self):
        # A state refused loses the sessions; what was handed over for
        # them (the ring memfds, the PTYs) is closed, not left pinned.
        pid = self.healthz()['pid']
        self.create(id='lost', cmd='sleep 30', tty=True)
        self.upgrade(self.script('corrupt', CORRUPT))
        deadline = time.monotonic() + 10
        while 'the state is refused' not in self.agentd.stderr():
            self.assertLess(time.monotonic(), deadline, self.agentd.stderr()[-2000:])
            time.sleep(0.05)
        # The new agentd runs afresh on the listeners it was handed.
        h = self.healthz(client=self.agentd.tcp_client())
        self.assertEqual((h['pid'], h['upgrades']), (pid, 0))
        self.assertEqual(self.healthz(client=self.agentd.unix_client())['pid'], pid)
        self.assertIn('taking over listener', self.agentd.stderr())
        self.assertIn('fds the old agentd handed over', self.agentd.stderr())
        links = [os.readlink('/proc/%d/fd/%s' % (pid, fd))
                 for fd in os.listdir('/proc/%d/fd' % pid)]
        self.assertFalse([l for l in links if l.startswith('/memfd:') or
                          'ptmx' in l], links)
        self.create(id='fresh', cmd='echo ok', yield_ms=5000)


class UpgradeRefusedTest(UpgradeTestCase):

    def assertNothingChanged(self, pid, sid):
        h = self.healthz()
        self.assertEqual(h['pid'], pid)
        self.assertEqual(h['upgrades'], 0)
        self.assertEqual(self.get(sid)['state'], 'running')

    def test_bad_requests(self):
        for body in ({}, {'path': 'agentd'}, {'path': 5}, [],
                     {'path': '/x', 'sha256': 'abc'}):
            r = self.req('POST', '/v1/sandbox/upgrade', body)
            self.assertError(r, 400, 'invalid_request')
        r = self.req('POST', '/v1/sandbox/upgrade', b'{"path":',
                     headers={'Content-Type': 'application/json'})
        self.assertError(r, 400, 'invalid_json')
        self.assertEqual(self.req('GET', '/v1/sandbox/upgrade').status, 405)

    def test_refused(self):
        pid = self.healthz()['pid']
        self.create(id='run', cmd='sleep 30')
        d = self.agentd.dir
        good = self.new_binary()
        # Missing, a directory, not executable.
        for path in (os.path.join(d, 'nope'), d):
            r = self.upgrade(path, status=422)
            self.assertError(r, 422, 'upgrade_rejected')
        os.chmod(good, 0o644)
        self.assertError(self.upgrade(good, status=422), 422, 'upgrade_rejected')
        # Writable by others.
        os.chmod(good, 0o777)
        r = self.upgrade(good, status=422)
        self.assertIn('writable', r.json['error']['message'])
        os.chmod(good, 0o755)
        # In a folder others can write (not sticky): it could be swapped
        # between the checks and the execve.
        open_dir = os.path.join(d, 'open')
        os.mkdir(open_dir)
        swappable = os.path.join(open_dir, 'agentd')
        shutil.copy2(good, swappable)
        os.chmod(open_dir, 0o777)
        r = self.upgrade(swappable, status=422)
        self.assertIn('folder another user can write', r.json['error']['message'])
        # A symlink in a safe folder to a binary in that open folder.
        link = os.path.join(d, 'link')
        os.symlink(swappable, link)
        r = self.upgrade(link, status=422)
        self.assertIn('folder another user can write', r.json['error']['message'])
        os.chmod(open_dir, 0o755)
        # Wrong sha256; then the right one goes through the other checks.
        with open(good, 'rb') as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        r = self.upgrade(good, sha256='0' * 64, status=422)
        self.assertIn('sha256', r.json['error']['message'])
        # A truncated binary: exec fails.
        cut = os.path.join(d, 'cut')
        with open(good, 'rb') as f, open(cut, 'wb') as g:
            g.write(f.read(4096))
        os.chmod(cut, 0o755)
        self.assertError(self.upgrade(cut, status=422), 422, 'upgrade_rejected')
        # A binary whose check fails, or that reads another format.
        for text in ('#!/bin/sh\nexit 1\n',
                     '#!/bin/sh\necho agentd-upgrade-state 2; echo version 9\n',
                     '#!/bin/sh\necho hello\n'):
            bad = os.path.join(d, 'bad')
            with open(bad, 'w') as f:
                f.write(text)
            os.chmod(bad, 0o755)
            self.assertError(self.upgrade(bad, status=422), 422, 'upgrade_rejected')
        self.assertNothingChanged(pid, 'run')
        self.assertGreaterEqual(self.metric('agentd_upgrade_failures_total'), 11)
        self.assertEqual(self.metric('agentd_upgrades_total'), 0)
        # And the right binary with its digest is taken.
        self.upgrade(good, sha256=digest)
        self.wait_upgraded(1)
        self.assertEqual(self.get('run')['state'], 'running')
        self.expect(self.delete('run'), 200)

    def test_agentctl(self):
        import subprocess
        ctl = os.environ.get('AGENTCTL') or os.path.join(
            os.path.dirname(os.path.dirname(self.agentd.binary)), 'agentctl', 'agentctl')
        if not os.path.exists(ctl):
            self.skipTest('no agentctl beside agentd')
        env = dict(os.environ, AGENTD_SOCKET=self.agentd.socket_path)
        bad = subprocess.run([ctl, 'upgrade', '--sha256', '0' * 64, self.new_binary()],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=60)
        self.assertEqual(bad.returncode, 1, bad)
        self.assertIn(b'sha256', bad.stderr)
        out = subprocess.run([ctl, 'upgrade', os.path.relpath(self.new_binary('b'))],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out)
        self.assertIn(b'upgraded: agentd', out.stdout)
        self.assertEqual(self.healthz()['upgrades'], 1)

    def test_check_does_not_stop_the_loop(self):
        slow = os.path.join(self.agentd.dir, 'slow')
        with open(slow, 'w') as f:
            f.write('#!/bin/sh\nsleep 1.5\nexit 1\n')
        os.chmod(slow, 0o755)
        t0 = time.monotonic()
        bg = Background(self.req, 'POST', '/v1/sandbox/upgrade', {'path': slow},
                        client=self.agentd.tcp_client())
        time.sleep(0.3)
        # Meanwhile agentd answers, and a second upgrade is refused.
        self.assertEqual(self.healthz()['upgrades'], 0)
        self.assertLess(time.monotonic() - t0, 1.2)
        r = self.upgrade(self.new_binary(), status=422)
        self.assertIn('under way', r.json['error']['message'])
        r = bg.join_result(20)
        self.assertError(r, 422, 'upgrade_rejected')
        self.assertIn('exit status 1', r.json['error']['message'])
        self.assertGreater(time.monotonic() - t0, 1.4)

    def test_check_mode(self):
        import subprocess
        out = subprocess.run([self.agentd.binary, '--upgrade-check'],
                             stdout=subprocess.PIPE, timeout=10)
        self.assertEqual(out.returncode, 0)
        lines = out.stdout.decode().split('\n')
        self.assertEqual(lines[0], 'agentd-upgrade-state 1')
        self.assertTrue(lines[1].startswith('version '), out.stdout)


FAULTY = '''#!/usr/bin/python3
# Passes its check, then runs agentd in a way that cannot start: with a
# flag it does not know, or an address it cannot bind (it exits at once),
# or with its token file swapped for a FIFO nobody writes (it hangs there,
# or the test crashes it).
import os, sys
if sys.argv[1:2] == ['--upgrade-check']:
    os.execv(%(path)r, [%(path)r] + sys.argv[1:])
args = list(sys.argv[1:])
if %(mode)r in ('crash', 'hang'):
    args[args.index('--token-file') + 1] = %(fifo)r
else:
    args += %(extra)r
os.execv(%(path)r, [%(path)r] + args)
'''


class UpgradeRollbackTest(UpgradeTestCase):
    """A new binary that passes --upgrade-check but cannot start: agentd
    runs its old binary again, with every session (issue 38 item 12)."""

    agentd_args = ('--upgrade-ready-timeout', '3000')

    def faulty(self, mode, extra=()):
        real = self.new_binary('agentd-real')
        fifo = os.path.join(self.agentd.dir, 'token-fifo')
        if not os.path.exists(fifo):
            os.mkfifo(fifo, 0o600)
        path = os.path.join(self.agentd.dir, 'agentd-' + mode)
        with open(path, 'w') as f:
            f.write(FAULTY % {'path': real, 'mode': mode, 'fifo': fifo,
                              'extra': list(extra)})
        os.chmod(path, 0o755)
        return path

    def sessions(self):
        flow = self.create(id='flow', cmd='for i in $(seq 1 60); do echo line $i; '
                           'sleep 0.05; done; exit 3')
        tty = self.create(id='tty', tty=True, argv=['/bin/sh'])
        cat = self.create(id='cat', cmd='cat', stdin=True)
        self.stdin('cat', text='before\n')
        ck = self.read_until('flow', b'line 3\n')
        return flow, tty, cat, ck, self.fds(self.healthz()['pid'])

    def blocked_in_open(self, pid):
        """Whether pid runs agentd (not the wrapper) and waits in open()."""
        try:
            with open('/proc/%d/syscall' % pid) as f:
                nr = f.read().split()[0]
            exe = os.readlink('/proc/%d/exe' % pid)
        except OSError:
            return False
        return exe.endswith('agentd-real') and nr in ('257', '56', '2')

    def fds(self, pid):
        """What pid holds open, but sockets, pipes (connections and
        sessions come and go) and the port feed's walk of /proc."""
        out = []
        for fd in os.listdir('/proc/%d/fd' % pid):
            try:
                link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
            except OSError:
                continue
            if not link.startswith(('socket:', 'pipe:', '/proc')):
                out.append(re.sub(r'\[\d+\]|\(deleted\)', '', link).strip())
        return sorted(out)

    def rolled_back(self, pid, flow, tty, cat, ck, fds, why):
        deadline = time.monotonic() + 20
        while self.metric('agentd_upgrade_rollbacks_total') < 1:
            self.assertLess(time.monotonic(), deadline, self.agentd.stderr()[-3000:])
            time.sleep(0.05)
        h = self.healthz()
        self.assertEqual((h['pid'], h['upgrades']), (pid, 0))
        self.assertEqual(self.metric('agentd_upgrade_failures_total'), 1)
        # Every session, the same processes, their output whole.
        ck = self.read_all('flow', checker=ck)
        self.assertEqual(ck.streams().get('stdout'),
                         b''.join(b'line %d\n' % i for i in range(1, 61)))
        self.assertEqual(ck.last['exit_code'], 3)
        self.assertEqual(self.get('tty')['pid'], tty['pid'])
        self.stdin('tty', text='echo mark-$((6*7))\n')
        self.read_until('tty', b'mark-42', tty=True)
        self.assertEqual(self.get('cat')['pid'], cat['pid'])
        self.stdin('cat', text='after\n', eof=True)
        self.assertEqual(self.read_all('cat').data(), b'before\nafter\n')
        ev = self.events(types='sandbox.upgrade_failed,sandbox.upgraded')
        self.assertEqual([e['type'] for e in ev['events']],
                         ['sandbox.upgrade_failed'], ev)
        self.assertIn(why, ev['events'][0]['reason'])
        self.assertIn('did not take over', self.agentd.stderr())
        # Nothing of the failed binary, the old image, the record or the
        # state is left open.
        self.assertEqual(self.fds(pid), fds)
        self.assertFalse([f for f in fds if 'fifo' in f or os.path.basename(
            f).startswith(('agentd-', 'memfd:agentd-'))], fds)
        # And a good upgrade goes through afterwards.
        self.upgrade(self.new_binary('agentd-good'))
        self.assertEqual(self.wait_upgraded(1)['pid'], pid)
        self.expect(self.signal_raw('tty', 'SIGKILL'), 200)

    def test_exits_at_once(self):
        pid = self.healthz()['pid']
        state = self.sessions()
        self.upgrade(self.faulty('exit', ['--no-such-flag']))
        self.rolled_back(pid, *state, why='bad configuration')

    def test_cannot_listen(self):
        pid = self.healthz()['pid']
        state = self.sessions()
        busy = socket.socket()
        busy.bind(('127.0.0.1', 0))
        busy.listen(1)
        try:
            self.upgrade(self.faulty('busy', ['--listen', '127.0.0.1:%d'
                                              % busy.getsockname()[1]]))
            self.rolled_back(pid, *state, why='exit')
        finally:
            busy.close()

    def test_crashes(self):
        pid = self.healthz()['pid']
        state = self.sessions()
        self.upgrade(self.faulty('crash'))
        self.wait_until(lambda: self.blocked_in_open(pid), timeout=10,
                        what='the new agentd in its start')
        os.kill(pid, signal.SIGSEGV)
        self.rolled_back(pid, *state, why='signal 11')

    def test_hangs(self):
        pid = self.healthz()['pid']
        state = self.sessions()
        t0 = time.monotonic()
        self.upgrade(self.faulty('hang'))
        self.rolled_back(pid, *state, why='not ready in time')
        self.assertGreater(time.monotonic() - t0, 2.9)


if __name__ == '__main__':
    unittest.main()
