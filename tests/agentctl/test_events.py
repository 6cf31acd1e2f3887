"""agentctl events: the event feed, printed and followed."""

import json
import subprocess

from ctlharness import CtlTestCase, binary, RUN_TIMEOUT


class TestEvents(CtlTestCase):

    def test_lines_and_json(self):
        sid = self.uid('ev')
        self.agentd.create(id=sid, cmd='exit 4')
        self.agentd.wait_exited(sid)
        p = self.ctl('events', '--session', sid)
        self.assertRc(p, 0)
        lines = p.stdout.decode().splitlines()
        self.assertEqual(len(lines), 2, lines)
        f = lines[0].split()
        self.assertRegex(f[0], r'^\d+$')
        self.assertRegex(f[1], r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
        self.assertEqual(f[2:4], ['session.created', sid])
        f = lines[1].split()
        self.assertEqual(f[2:4], ['session.exited', sid])
        self.assertIn('exit_code=4', f)
        self.assertIn('signal=null', f)
        self.assertIn('timed_out=false', f)
        p = self.ctl('events', '--session', sid, '--types', 'session.exited',
                     '--json', tcp=True)
        self.assertRc(p, 0)
        evs = [json.loads(l) for l in p.stdout.decode().splitlines()]
        self.assertEqual(len(evs), 1)
        self.assertEqual(evs[0]['type'], 'session.exited')
        self.assertEqual(evs[0]['exit_code'], 4)
        self.assertEqual(int(lines[1].split()[0]), evs[0]['id'])
        # after its id: nothing more of that session
        p = self.ctl('events', '--session', sid, '--cursor', str(evs[0]['id']))
        self.assertRc(p, 0)
        self.assertEqual(p.stdout, b'')

    def test_count_waits(self):
        sid = self.uid('wait')
        w = subprocess.Popen([binary('AGENTCTL'), 'events', '-c', '1',
                              '--session', sid, '--types', 'session.exited'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.agentd.ctl_env())
        self.agentd.create(id=sid, cmd='sleep 0.5; exit 9')
        out, err = w.communicate(timeout=RUN_TIMEOUT)
        self.assertEqual(w.returncode, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertIn('session.exited', lines[0])
        self.assertIn('exit_code=9', lines[0])

    def test_errors(self):
        p = self.ctl('events', '--cursor', 'x')
        self.assertRc(p, 2)
        p = self.ctl('events', '-c', '0')
        self.assertRc(p, 2)
        p = self.ctl('events', 'extra')
        self.assertRc(p, 2)
        p = self.ctl('events', '--types', 'Bad!')
        self.assertRc(p, 1)
        self.assertIn(b'types', p.stderr)
        p = self.ctl('events', '--cursor', '999999999')
        self.assertRc(p, 1)
        self.assertIn(b'cursor', p.stderr)
