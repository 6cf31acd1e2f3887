"""GET and PUT /v1/files: round trips, ranges, modes, mkdir, atomicity, errors."""

import hashlib
import os
import random
import stat
import threading
import time
import unittest

from harness import Agentd, Background
from filesutil import FilesCase, q


class RoundTripTest(FilesCase):

    def test_round_trips(self):
        rnd = random.Random(8)
        for size in (0, 1, 4095, 4096, 65537, (1 << 20) + 7):
            data = bytes(rnd.getrandbits(8) for _ in range(size)) if size < 70000 \
                else os.urandom(size)
            path = self.p('rt-%d.bin' % size)
            r = self.expect(self.put(path, data), 200, 'PUT %d bytes' % size)
            self.assertEqual(r.json, {'path': path, 'size': size,
                                      'sha256': hashlib.sha256(data).hexdigest()})
            with open(path, 'rb') as f:
                self.assertEqual(f.read(), data)
            g = self.expect(self.get_file(path), 200, 'GET %d bytes' % size)
            self.assertEqual(g.body, data, 'GET of %d bytes' % size)
            self.assertEqual(g.header('Content-Type'), 'application/octet-stream')
            self.assertEqual(int(g.header('Content-Length')), size)
        self.assertEqual(self.leftovers(), [])
        # the same over the unix socket (sendfile to an AF_UNIX peer)
        u = self.agentd.unix_client()
        self.assertEqual(self.get_file(path, client=u).body, data)
        self.expect(self.put(self.p('via-unix'), data, client=u), 200)
        self.assertEqual(self.get_file(self.p('via-unix'), client=u).body, data)

    def test_ranges(self):
        data = os.urandom(10000)
        path = self.p('r.bin')
        self.expect(self.put(path, data), 200)
        cases = [
            ({'offset': 0}, data),
            ({'offset': 1}, data[1:]),
            ({'offset': 9999}, data[9999:]),
            ({'offset': 10000}, b''),               # at EOF: empty 200
            ({'offset': 123456789}, b''),           # beyond EOF: empty 200
            ({'length': 0}, b''),
            ({'length': 1}, data[:1]),
            ({'offset': 100, 'length': 50}, data[100:150]),
            ({'offset': 9990, 'length': 50}, data[9990:]),  # cut at EOF
            ({'length': 1 << 62}, data),
        ]
        for params, want in cases:
            g = self.expect(self.get_file(path, **params), 200, repr(params))
            self.assertEqual(g.body, want, repr(params))
            self.assertEqual(int(g.header('Content-Length')), len(want))
        for bad in ({'offset': '-1'}, {'offset': 'x'}, {'length': '1.5'},
                    {'length': '99999999999999999999999'}):
            self.assertError(self.get_file(path, **bad), 400, 'invalid_request',
                             list(bad)[0])

    def test_keep_alive_after_streams(self):
        """Several GETs and PUTs on one connection, bodies framed right."""
        path = self.p('ka.bin')
        data = os.urandom(300000)
        self.expect(self.put(path, data), 200)
        for i in range(5):
            g = self.expect(self.get_file(path, offset=i * 1000, length=200000), 200)
            self.assertEqual(g.body, data[i * 1000:i * 1000 + 200000])
            self.expect(self.put(self.p('ka-%d' % i), b'x' * i), 200)
        self.assertEqual(self.c.connects, 1, 'the connection was not kept')

    def test_modes(self):
        for mode in ('0600', '0644', '0755', '0400', '0777', '1777', '4755', '644'):
            path = self.p('m' + mode)
            self.expect(self.put(path, b'#!/bin/sh\n', mode=mode), 200, mode)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), int(mode, 8), mode)
        path = self.p('default')
        old = os.umask(0o077)
        try:
            self.expect(self.put(path, b'd'), 200)
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o644)
        for bad in ('0800', 'rw', '', '77777', '-1'):
            self.assertError(self.put(self.p('bad'), b'x', mode=bad), 400,
                             'invalid_request', 'mode')
        self.assertFalse(os.path.exists(self.p('bad')))

    def test_replace_is_a_rename(self):
        path = self.p('f')
        self.expect(self.put(path, b'one', mode='0600'), 200)
        ino = os.stat(path).st_ino
        with open(path, 'rb') as held:
            self.expect(self.put(path, b'two', mode='0640'), 200)
            self.assertEqual(held.read(), b'one', 'the old file was written in place')
        self.assertNotEqual(os.stat(path).st_ino, ino)
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), b'two')
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o640)
        self.assertEqual(sorted(os.listdir(self.root)), ['f'])

    def test_symlink_at_target_is_replaced(self):
        target = self.p('target')
        with open(target, 'wb') as f:
            f.write(b'target')
        link = self.p('link')
        os.symlink(target, link)
        self.expect(self.put(link, b'new'), 200)
        self.assertFalse(os.path.islink(link))
        with open(target, 'rb') as f:
            self.assertEqual(f.read(), b'target')

    def test_mkdir(self):
        path = self.p('a', 'b', 'c', 'f.txt')
        self.assertError(self.put(path, b'x'), 404, 'not_found')
        self.assertFalse(os.path.exists(self.p('a')))
        r = self.expect(self.put(path, b'deep', mkdir='true'), 200)
        self.assertEqual(r.json['size'], 4)
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), b'deep')
        for d in ('a', 'a/b', 'a/b/c'):
            self.assertTrue(os.path.isdir(self.p(d)))
        # existing folders are fine; a file in the way is not
        self.expect(self.put(self.p('a', 'g'), b'g', mkdir='1'), 200)
        self.assertError(self.put(self.p('a', 'g', 'h', 'i'), b'x', mkdir='true'),
                         404, 'not_found')
        self.assertError(self.put(self.p('x'), b'x', mkdir='maybe'), 400,
                         'invalid_request', 'mkdir')

    def test_get_errors(self):
        self.assertError(self.get_file(self.p('missing')), 404, 'not_found')
        self.assertError(self.get_file(self.p('missing', 'deeper')), 404, 'not_found')
        self.assertError(self.get_file(self.root), 409, 'is_a_directory')
        self.assertError(self.get_file('relative/path'), 400, 'invalid_request', 'path')
        self.assertError(self.get_file(''), 400, 'invalid_request', 'path')
        self.assertError(self.req('GET', '/v1/files'), 400, 'invalid_request', 'path')
        self.assertError(self.req('GET', '/v1/files?path=%2Ftmp%00x'), 400,
                         'invalid_request', 'path')
        self.assertError(self.req('GET', '/v1/files?path=%zz'), 400, 'invalid_request')
        fifo = self.p('fifo')
        os.mkfifo(fifo)
        r = self.get_file(fifo)            # must not hang the loop
        self.assertEqual(r.status, 409, r.body)
        self.assertError(self.req('DELETE', '/v1/files' + q(path=fifo)), 405,
                         'method_not_allowed')
        self.assertError(self.req('GET', '/v1/files/nope'), 404, 'not_found')
        self.assertError(self.req('GET', '/v1/files/stat'), 405, 'method_not_allowed')

    def test_get_pseudo_file(self):
        """A /proc file says size 0 but has content: read to its end."""
        g = self.expect(self.get_file('/proc/self/status'), 200)
        self.assertIn(b'VmRSS', g.body)
        g = self.expect(self.get_file('/proc/self/status', offset=5, length=3), 200)
        self.assertEqual(len(g.body), 3)

    def test_put_errors(self):
        self.assertError(self.put('relative.txt', b'x'), 400, 'invalid_request', 'path')
        self.assertError(self.put(self.root, b'x'), 409, 'is_a_directory')
        self.assertError(self.put(self.root + '/', b'x'), 400, 'invalid_request', 'path')
        self.assertError(self.put(self.p('f') + '/..', b'x'), 400, 'invalid_request')
        self.assertError(self.put(self.p('nodir', 'f'), b'x'), 404, 'not_found')
        self.assertEqual(self.leftovers(), [])

    def test_atomic_replace_under_readers(self):
        """Readers polling the path during big PUTs see old or new, never partial."""
        path = self.p('atomic.bin')
        size = 4 << 20
        versions = [bytes([65 + i]) * size for i in range(4)]
        digests = {hashlib.sha256(v).digest() for v in versions}
        self.expect(self.put(path, versions[0]), 200)
        stop = threading.Event()
        seen = {'reads': 0, 'bad': []}

        def reader():
            while not stop.is_set():
                try:
                    with open(path, 'rb') as f:
                        b = f.read()
                except FileNotFoundError:
                    seen['bad'].append('missing')
                    continue
                seen['reads'] += 1
                if hashlib.sha256(b).digest() not in digests:
                    seen['bad'].append('partial: %d bytes' % len(b))
        threads = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for i in range(12):
                self.expect(self.put(path, versions[(i + 1) % 4]), 200)
                g = self.expect(self.get_file(path), 200)
                self.assertIn(hashlib.sha256(g.body).digest(), digests)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        self.assertEqual(seen['bad'], [], 'a reader saw a half-written file')
        self.assertGreater(seen['reads'], 10)
        self.assertEqual(self.leftovers(), [])

    def test_concurrent_puts_same_path(self):
        path = self.p('race')
        bodies = [bytes([i]) * 100000 for i in range(6)]
        clients = [self.agentd.tcp_client() for _ in bodies]
        jobs = [Background(self.put, path, b, client=c) for b, c in zip(bodies, clients)]
        for j in jobs:
            self.expect(j.join_result(), 200)
        with open(path, 'rb') as f:
            self.assertIn(f.read(), bodies)
        self.assertEqual(os.listdir(self.root), ['race'])


class BodyLimitTest(FilesCase):
    agentd_args = ('--max-body', '1M')

    def test_too_large(self):
        r = self.put(self.p('big'), b'x' * (2 << 20))
        self.assertError(r, 413, 'body_too_large')
        self.assertFalse(os.path.exists(self.p('big')))
        self.assertEqual(self.leftovers(), [])
        self.c.close()
        self.expect(self.put(self.p('ok'), b'x' * (1 << 20)), 200)


class NobodyAgentd(Agentd):
    """agentd as uid/gid 65534, for permission errors when the tests run as root."""

    def argv(self):
        args = super().argv()
        os.chmod(self.dir, 0o755)
        if self.token_file:
            os.chmod(self.token_file, 0o644)
        return ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                '--inh-caps=-all', '--'] + args


class PermissionTest(FilesCase):
    autostart = False

    def setUp(self):
        super(FilesCase, self).setUp()
        if os.geteuid() == 0:
            if not os.path.exists('/usr/bin/setpriv'):
                raise unittest.SkipTest('setpriv (util-linux) is missing')
            a = NobodyAgentd((), socket_path='')
            self._all_agentd.append(a)
            a.start()
            self.agentd = a
            self.c = a.tcp_client()
        else:
            self.start_agentd()
        self.root = os.path.join(self.agentd.dir, 'files')
        os.mkdir(self.root)
        os.chmod(self.root, 0o777)

    def test_permission_denied(self):
        secret = self.p('secret')
        with open(secret, 'wb') as f:
            f.write(b'secret')
        os.chmod(secret, 0o600)
        locked = self.p('locked')
        os.mkdir(locked, 0o755)
        if os.geteuid() != 0:
            os.chmod(secret, 0o000)
            os.chmod(locked, 0o555)
        self.assertError(self.get_file(secret), 403, 'permission_denied')
        self.assertError(self.put(self.p('locked', 'f'), b'x'), 403, 'permission_denied')
        self.assertError(self.put(self.p('locked', 'a', 'f'), b'x', mkdir='true'), 403,
                         'permission_denied')
        hidden = self.p('hidden')
        os.mkdir(hidden, 0o700)
        with open(os.path.join(hidden, 'f'), 'wb') as f:
            f.write(b'x')
        if os.geteuid() != 0:
            os.chmod(hidden, 0o000)
        r = self.expect(self.stat([os.path.join(hidden, 'f')]), 200)
        self.assertEqual(r.json['results'][0]['exists'], False)
        self.assertEqual(r.json['results'][0]['error'], 'EACCES')
        # what agentd may do still works
        self.expect(self.put(self.p('mine'), b'ok'), 200)
        self.assertEqual(self.get_file(self.p('mine')).body, b'ok')


if __name__ == '__main__':
    unittest.main()
