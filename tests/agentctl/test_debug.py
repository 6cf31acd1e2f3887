"""GET /debug/stat, GET /debug/logs, agentctl stat and agentctl logs."""

import http.client
import json
import os
import subprocess
import threading

from ctlharness import CtlTestCase, wait_until


class TestDebug(CtlTestCase):

    def stat(self):
        status, j = self.agentd.api('GET', '/debug/stat')
        self.assertEqual(status, 200)
        return j

    def test_stat_process_figures(self):
        j = self.stat()
        self.assertEqual(j['pid'], self.agentd.proc.pid)
        self.assertGreater(j['fds'], 2)
        self.assertLess(j['fds'], 1000)
        # Our request's connection may come or go in between: roughly.
        self.assertLessEqual(abs(j['fds'] - len(os.listdir(
            '/proc/%d/fd' % self.agentd.proc.pid))), 3)
        self.assertGreater(j['rss_bytes'], 100 * 1024)
        self.assertGreaterEqual(j['uptime_ms'], 0)
        self.assertIn('restarts', j['companion'])
        self.assertFalse(j['companion']['running'])
        for k in ('interval_ms', 'last_ms', 'max_ms', 'avg_ms', 'samples'):
            self.assertIn(k, j['loop_lag'])
        # The lag timer runs: samples come in, and lag is never negative.
        j = wait_until(lambda: (lambda s: s if s['loop_lag']['samples'] >= 3
                                else None)(self.stat()), what='lag samples')
        self.assertGreaterEqual(j['loop_lag']['max_ms'],
                                j['loop_lag']['last_ms'])
        self.assertGreaterEqual(j['loop_lag']['last_ms'], 0)

    def test_stat_connections(self):
        """Each open connection with its transport and peer: a TCP long-poll
        held from 127.0.0.1:PORT, and this request's unix socket (uid)."""
        sid = self.uid('conn')
        self.agentd.create(id=sid, argv=['sleep', '60'])
        conn = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                          timeout=30)
        try:
            conn.connect()
            local = conn.sock.getsockname()
            conn.putrequest('GET', '/v1/sessions/%s?cursor=0&wait_ms=10000'
                            % sid)
            conn.putheader('Authorization', 'Bearer ' + self.agentd.token)
            conn.endheaders()

            def held():
                j = self.stat()
                mine = [c for c in j['connections']
                        if c['peer'] == '127.0.0.1:%d' % local[1]]
                return (j, mine[0]) if mine and mine[0]['busy'] else None
            j, c = wait_until(held, what='the long-poll in /debug/stat')
            self.assertEqual(c['transport'], 'tcp')
            self.assertFalse(c['unproven'])
            self.assertIsInstance(c['fd'], int)
            unix = [c for c in j['connections'] if c['transport'] == 'unix']
            self.assertIn('uid %d' % os.getuid(), [c['peer'] for c in unix])
            self.assertEqual(j['connections_listed'], len(j['connections']))
            by = j['connections_by_transport']
            self.assertGreaterEqual(by['tcp'], 1)
            self.assertGreaterEqual(by['unix'], 1)
            self.assertEqual(by['vsock'], 0)
        finally:
            conn.close()
            self.agentd.api('DELETE', '/v1/sessions/%s?grace_ms=0' % sid)

    def test_vsock_listen_bad_port(self):
        """--vsock-listen takes 1..4294967294 and stops the start
        otherwise (the parse fails before any vsock socket is made)."""
        for port in ('0', '4294967295', 'x', '-1'):
            p = subprocess.run(
                [self.agentd.binary, '--listen', '127.0.0.1:0', '--socket',
                 '', '--vsock-listen', port], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn(b'--vsock-listen %s: a vsock port is a number in '
                          b'1..4294967294' % port.encode(), p.stdout)

    def test_stat_rings_and_readers(self):
        sid = self.uid('ring')
        # A 4 KiB ring and 200 KB of output: most of it is dropped.
        self.agentd.create(id=sid, ring_bytes=4096,
                           cmd='head -c 200000 /dev/zero; sleep 60')
        wait_until(lambda: self.agentd.session(sid)['bytes_out'] == 200000,
                   what='output')

        def ring():
            for s in self.stat()['sessions']:
                if s['id'] == sid:
                    return s
            self.fail('session %s not in /debug/stat' % sid)
        s = ring()
        r = s['ring']
        self.assertEqual(s['state'], 'running')
        self.assertEqual(r['capacity'], 4096)
        self.assertLessEqual(r['held_bytes'], 4096)
        self.assertGreater(r['dropped_chunks'], 0)
        self.assertGreater(r['dropped_bytes'], 190000)
        self.assertEqual(r['total_bytes'], 200000)
        self.assertEqual(r['held_bytes'] + r['dropped_bytes'], 200000)
        self.assertGreaterEqual(r['newest'], r['oldest'])
        self.assertEqual(r['held_chunks'], r['newest'] - r['oldest'] + 1)
        self.assertEqual(s['readers'], 0)

        # A long-poll parked on the session is a reader.
        cursor = r['newest']
        t = threading.Thread(target=self.agentd.api, args=(
            'GET', '/v1/sessions/%s?cursor=%d&wait_ms=20000' % (sid, cursor)))
        t.start()
        try:
            wait_until(lambda: ring()['readers'] == 1, what='a reader')
            p = self.ctl('stat')
            self.assertRc(p, 0)
            row = [l.split() for l in p.stdout.decode().splitlines()
                   if l.startswith(sid + ' ')]
            self.assertEqual(len(row), 1, p.stdout)
            # ID STATE PID READERS RING HELD CHUNKS OLDEST NEWEST DROPPED ...
            self.assertEqual(row[0][1], 'running')
            self.assertEqual(row[0][3], '1')
            self.assertEqual(row[0][4], '4096')
        finally:
            self.ctl('rm', '--grace', '0', sid)
            t.join(30)
        self.assertFalse(t.is_alive())

    def test_agentctl_stat(self):
        p = self.ctl('stat')
        self.assertRc(p, 0)
        out = p.stdout.decode()
        for word in ('pid %d' % self.agentd.proc.pid, 'uptime', 'rss', 'fds',
                     'loop lag', 'companion', 'restarts', 'sessions'):
            self.assertIn(word, out)
        p = self.ctl('stat', '--json')
        self.assertRc(p, 0)
        self.assertEqual(json.loads(p.stdout)['pid'], self.agentd.proc.pid)

    def test_logs(self):
        sid = self.uid('logged')
        self.agentd.create(id=sid, cmd='exit 0')
        self.agentd.wait_exited(sid)
        status, j = self.agentd.api('GET', '/debug/logs')
        self.assertEqual(status, 200)
        self.assertTrue(any(sid in l for l in j['lines']), j['lines'][-5:])
        status, text = self.agentd.api('GET', '/debug/logs?format=text')
        self.assertEqual(status, 200)
        self.assertIn(sid.encode(), text)

        p = self.ctl('logs')
        self.assertRc(p, 0)
        lines = p.stdout.decode().splitlines()
        self.assertTrue(any(sid in l for l in lines))
        self.assertTrue(any('ready' in l for l in lines), lines[:5])
        p = self.ctl('logs', '-n', '1')
        self.assertEqual(len(p.stdout.decode().splitlines()), 1)
        p = self.ctl('logs', '--json')
        self.assertRc(p, 0)
        self.assertIn('lines', json.loads(p.stdout))

    def test_debug_routes(self):
        status, j = self.agentd.api('GET', '/debug/nothing')
        self.assertEqual(status, 404)
        status, j = self.agentd.api('POST', '/debug/stat', {})
        self.assertEqual(status, 405)
        for path in ('/debug/stat', '/debug/logs', '/debug/nothing'):
            status, j = self.agentd.api('GET', path, tcp=True)
            self.assertEqual(status, 404)
            self.assertEqual(j['error']['code'], 'not_found')
