"""agentctl ports: the listening sockets, -p PORT, --wait, --json."""

import json
import time

from ctlharness import CtlTestCase, free_port


class TestPorts(CtlTestCase):

    def test_ports_of_a_session(self):
        sid, port = self.uid('web'), free_port()
        self.agentd.create(id=sid, cmd='exec python3 -m http.server %d '
                           '--bind 127.0.0.1' % port)
        try:
            p = self.ctl('ports', '-p', str(port), '--wait', '20000')
            self.assertRc(p, 0)
            lines = p.stdout.decode().splitlines()
            self.assertEqual(lines[0].split(),
                             ['PROTO', 'ADDRESS', 'PORT', 'PID', 'SESSION',
                              'FORWARDED'])
            self.assertEqual(len(lines), 2, lines)
            row = lines[1].split()
            self.assertEqual(row[:3], ['tcp', '127.0.0.1', str(port)])
            self.assertRegex(row[3], r'^\d+$')
            self.assertEqual(row[4], sid)
            self.assertEqual(row[5], '-')   # forwarding is off here

            p = self.ctl('ports')
            self.assertRc(p, 0)
            self.assertIn(lines[1], p.stdout.decode().splitlines())
            # agentd's own listener: no session.
            own = [l.split() for l in p.stdout.decode().splitlines()
                   if l.split()[2:3] == [str(self.agentd.port)]]
            self.assertTrue(own, p.stdout)
            self.assertEqual(own[0][4], '-')

            p = self.ctl('ports', '--json', '-p', str(port))
            self.assertRc(p, 0)
            self.assertEqual(json.loads(p.stdout)['ports'], [{
                'address': '127.0.0.1', 'port': port, 'protocol': 'tcp',
                'pid': int(row[3]), 'session': sid, 'forward': None}])
        finally:
            self.agentd.api('DELETE', '/v1/sessions/' + sid)

    def test_nothing_listens(self):
        port = free_port()
        t0 = time.monotonic()
        p = self.ctl('ports', '-p', str(port), '--wait', '400')
        self.assertGreaterEqual(time.monotonic() - t0, 0.35)
        self.assertRc(p, 1)
        self.assertIn(b'nothing listens on port %d' % port, p.stderr)
        self.assertEqual(len(p.stdout.decode().splitlines()), 1)

    def test_usage(self):
        for args in (['-p', '0'], ['-p', 'x'], ['-p', '70000'],
                     ['--wait', '100'], ['-p', '80', '--wait', '-1'],
                     ['extra']):
            p = self.ctl('ports', *args)
            self.assertRc(p, 2)
