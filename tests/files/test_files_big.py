"""Large files through GET /v1/files: streamed, with agentd's memory bounded."""

import hashlib
import os
import socket
import threading
import time
import unittest

from filesutil import FilesCase, q, rss_kib

RSS_LIMIT_KIB = 64 * 1024


class BigFileTest(FilesCase):

    def sampled(self, fn):
        """Run fn() while sampling agentd's VmRSS; returns (result, peak KiB)."""
        pid = self.agentd.proc.pid
        peak = [rss_kib(pid)]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(pid))
                time.sleep(0.01)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            return fn(), peak[0]
        finally:
            done.set()
            t.join()

    def fd_targets(self):
        d = '/proc/%d/fd' % self.agentd.proc.pid
        out = []
        for n in os.listdir(d):
            try:
                out.append(os.readlink(os.path.join(d, n)))
            except OSError:
                pass
        return sorted(out)

    def fds(self):
        return len(os.listdir('/proc/%d/fd' % self.agentd.proc.pid))

    def test_sparse_512mib(self):
        path = self.p('sparse')
        size = 512 << 20
        with open(path, 'wb') as f:
            f.truncate(size)
            f.seek(size - 5)
            f.write(b'tail!')
        h = hashlib.sha256()
        t0 = time.monotonic()
        (status, headers, total), peak = self.sampled(
            lambda: self.stream_get(path, h.update))
        took = time.monotonic() - t0
        self.assertEqual(status, 200)
        self.assertEqual(int(headers['Content-Length']), size)
        self.assertEqual(total, size)
        want = hashlib.sha256()
        zeros = bytes(1 << 20)
        for _ in range(511):
            want.update(zeros)
        want.update(bytes((1 << 20) - 5) + b'tail!')
        self.assertEqual(h.hexdigest(), want.hexdigest())
        self.assertLess(peak, RSS_LIMIT_KIB, 'agentd RSS peaked at %d KiB' % peak)
        print('\n512 MiB GET: %.2f s, peak RSS %d KiB' % (took, peak))

    def test_random_64mib_and_far_ranges(self):
        path = self.p('random')
        block = os.urandom(1 << 20)
        with open(path, 'wb') as f:
            for i in range(64):
                f.write(bytes([i]) + block[1:])
        want = hashlib.sha256()
        with open(path, 'rb') as f:
            for chunk in iter(lambda: f.read(1 << 20), b''):
                want.update(chunk)
        h = hashlib.sha256()
        (status, _, total), peak = self.sampled(lambda: self.stream_get(path, h.update))
        self.assertEqual((status, total), (200, 64 << 20))
        self.assertEqual(h.hexdigest(), want.hexdigest())
        self.assertLess(peak, RSS_LIMIT_KIB)
        # ranges past 4 GiB in a sparse file
        far = self.p('far')
        with open(far, 'wb') as f:
            f.seek((5 << 30) + 100)
            f.write(b'needle')
        g = self.expect(self.get_file(far, offset=(5 << 30) + 98, length=10), 200)
        self.assertEqual(g.body, b'\0\0needle')

    def test_slow_and_vanishing_readers(self):
        """Slow readers and readers that hang up cost no memory and no fds."""
        path = self.p('sparse')
        with open(path, 'wb') as f:
            f.truncate(256 << 20)
        self.healthz()                      # self.c's connection, kept open
        fds0 = self.fds()
        socks = []
        for _ in range(8):
            s = socket.create_connection(('127.0.0.1', self.agentd.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(('GET /v1/files%s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s'
                       '\r\n\r\n' % (q(path=path), self.agentd.token)).encode())
            s.recv(1000)
            socks.append(s)
        time.sleep(0.5)
        self.assertLess(rss_kib(self.agentd.proc.pid), RSS_LIMIT_KIB)
        self.healthz()                      # the loop is free meanwhile
        for s in socks:
            s.close()
        self.wait_for(lambda: self.fds() <= fds0, timeout=10,
                      what='the file and socket fds closed (%d open, %d before: %s)'
                      % (self.fds(), fds0, self.fd_targets()))
        self.assertEqual(self.get_file(path, offset=(256 << 20) - 3).body, b'\0\0\0')


if __name__ == '__main__':
    unittest.main()
