"""Live upgrade (POST /v1/sandbox/upgrade) as PID 1 of a PID namespace and
as a plain child: the same pid, the sessions and the companion kept, and
the shutdown after it as clean as before; a new binary that cannot start
gives way to the old one, and PID 1 lives on."""

import os
import re
import shutil
import socket
import time

from pid1lib import QUICK, Pid1TestCase, agentd_path, wait_for


class UpgradeTest(Pid1TestCase):

    def upgrade_and_check(self, a, pid):
        new = os.path.join(a.dir, 'agentd-next')
        shutil.copyfile(agentd_path(), new)
        os.chmod(new, 0o755)
        count = a.create('for i in $(seq 1 20); do echo n$i; sleep 0.05; done; '
                         'exit 4', id='count')
        st, j = a.request('POST', '/v1/sandbox/upgrade', {'path': new})
        self.assertEqual(st, 202, j)
        h = wait_for(lambda: (lambda r: r[0] == 200 and r[1].get('upgrades') == 1 and r[1])(
            a.request('GET', '/healthz')), 20, interval=0.05,
            what='the new agentd')
        self.assertEqual(h['pid'], pid)
        out = a.read_until('count', b'n20\n')
        self.assertEqual(out.split(), [b'n%d' % i for i in range(1, 21)])
        j = wait_for(lambda: (lambda g: g['state'] == 'exited' and g)(
            a.get('count')), 20, interval=0.05, what='the exit')
        self.assertEqual((j['pid'], j['exit_code']), (count['pid'], 4))
        # A session started after it works as before.
        self.assertEqual(a.run('exit 6')[0], 6)

    def companion_pids(self, a):
        text = a.stderr()
        started = re.findall(r'companion sleep started, pid (\d+)', text)
        adopted = re.findall(r'companion sleep handed over, pid (\d+)', text)
        return started, adopted

    def test_pid1(self):
        a = self.start(pid1=True, companion=['sleep', '1000'])
        self.assertEqual(a.health['pid'], 1)
        self.upgrade_and_check(a, 1)
        started, adopted = self.companion_pids(a)
        self.assertEqual(len(started), 1, a.stderr())
        self.assertEqual(adopted, started, a.stderr())
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())

    def test_child(self):
        a = self.start(pid1=False, companion=['sleep', '1000'])
        self.upgrade_and_check(a, a.health['pid'])
        started, adopted = self.companion_pids(a)
        self.assertEqual(adopted, started, a.stderr())
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())

    def rollback_as_pid1(self, extra, why):
        """Upgrade PID 1 to a binary that passes its check, then runs
        agentd with extra flags: the old binary must run again."""
        a = self.start(pid1=True, companion=['sleep', '1000'])
        real = os.path.join(a.dir, 'agentd-real')
        shutil.copyfile(agentd_path(), real)
        os.chmod(real, 0o755)
        bad = os.path.join(a.dir, 'agentd-bad')
        with open(bad, 'w') as f:
            f.write('#!/bin/sh\n[ "$1" = --upgrade-check ] && exec %s "$@"\n'
                    'exec %s %s "$@"\n' % (real, real, extra))
        os.chmod(bad, 0o755)
        keep = a.create('sleep 1000', id='keep')
        st, j = a.request('POST', '/v1/sandbox/upgrade', {'path': bad})
        self.assertEqual(st, 202, j)
        wait_for(lambda: 'did not take over' in a.stderr(), 20,
                 interval=0.05, what='the rollback')
        self.assertIn(why, a.stderr())
        st, h = a.request('GET', '/healthz')
        self.assertEqual((st, h['pid'], h['upgrades']), (200, 1, 0))
        self.assertEqual(a.get('keep')['pid'], keep['pid'])
        self.assertEqual(a.run('exit 6')[0], 6)
        log = '\n'.join(a.log_lines())
        started = re.findall(r'companion sleep started, pid (\d+)', log)
        adopted = re.findall(r'companion sleep handed over, pid (\d+)', log)
        self.assertEqual((len(started), adopted), (1, started), log)
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())

    def test_pid1_rollback(self):
        # A flag it does not know: as PID 1 it would run on the defaults
        # (another socket, no --listen); the old binary runs instead.
        self.rollback_as_pid1('--no-such-flag', 'bad configuration')

    def test_pid1_rollback_fatal(self):
        # An address it cannot bind: as PID 1 that is fatal (a power-off).
        busy = socket.socket()
        busy.bind(('127.0.0.1', 0))
        busy.listen(1)
        try:
            self.rollback_as_pid1('--listen 127.0.0.1:%d' %
                                  busy.getsockname()[1], 'fatal')
        finally:
            busy.close()

    def test_companion_supervised_after(self):
        # The companion handed over is still supervised: its output is
        # logged, and it is restarted when it exits.
        a = self.start(pid1=True, companion=[
            'sh', '-c', 'while :; do echo tick; sleep 0.1; done'])
        new = os.path.join(a.dir, 'agentd-next')
        shutil.copyfile(agentd_path(), new)
        os.chmod(new, 0o755)
        wait_for(lambda: 'companion stdout: tick' in a.stderr(), 20,
                 interval=0.05, what='the first tick')
        st, j = a.request('POST', '/v1/sandbox/upgrade', {'path': new})
        self.assertEqual(st, 202, j)

        def after():
            log = '\n'.join(a.log_lines())
            return log[log.find('companion sh handed over'):]
        wait_for(lambda: 'handed over' in after() and
                 'companion stdout: tick' in after(), 20, interval=0.05,
                 what='a tick logged by the new agentd')
        pid = int(re.search(r'handed over, pid (\d+)', after()).group(1))
        st, _ = a.request('GET', '/healthz')
        self.assertEqual(st, 200)
        # Kill it (from inside the namespace: its pid is the namespace's).
        a.run('kill -9 %d' % pid)
        wait_for(lambda: 'companion sh started' in after(), 20,
                 interval=0.05, what='the restart')
        rc, _ = a.stop(expect_within=QUICK)
        self.assertEqual(rc, 0, a.stderr())
