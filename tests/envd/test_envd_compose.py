"""envd's POST /files/compose and GET /files' Range, conditional requests
and Accept-Encoding: gzip (issue 39 item 4), over the wire, as envd's
compose.go, download.go, encoding.go and Go's http.ServeContent answer
them.  The parts with another user need root (they use 'nobody')."""

import email.utils
import gzip
import json
import os
import pwd
import unittest
import urllib.parse

from test_envd_files import FilesCase, ROOT


class ComposeCase(FilesCase):

    def compose(self, body, token=True, raw=None):
        data = raw if raw is not None else json.dumps(body).encode()
        st, _, out = self.http('POST', '/files/compose', data,
                               {'Content-Type': 'application/json'},
                               token=token)
        return st, json.loads(out) if out else None

    def make(self, *parts):
        names = []
        for i, data in enumerate(parts):
            names.append(self.p('part%d' % i))
            with open(names[-1], 'wb') as fh:
                fh.write(data)
        return names


class TestCompose(ComposeCase):

    def test_order_sources_gone(self):
        srcs = self.make(b'one-', b'two-', b'', b'three')
        dest = self.p('new', 'deep', 'out.bin')
        st, r = self.compose({'source_paths': srcs, 'destination': dest})
        self.assertEqual(st, 200, r)
        self.assertEqual(r, {'name': 'out.bin', 'path': dest, 'type': 'file'})
        with open(dest, 'rb') as fh:
            self.assertEqual(fh.read(), b'one-two-three')
        for s in srcs:
            self.assertFalse(os.path.exists(s), s)
        # Nothing else left beside it (no temporary file).
        self.assertEqual(os.listdir(self.p('new', 'deep')), ['out.bin'])
        # Over an existing file, a large source (the kernel's copy).
        big = os.urandom(3 << 20)
        srcs = self.make(big, b'tail')
        st, r = self.compose({'source_paths': srcs, 'destination': dest})
        self.assertEqual(st, 200, r)
        with open(dest, 'rb') as fh:
            self.assertEqual(fh.read(), big + b'tail')
        self.assertEqual(os.stat(dest).st_mode & 0o777, 0o644)

    def test_bad_input(self):
        srcs = self.make(b'a', b'b')
        dest = self.p('out')
        cases = [
            (None, b'{"source_paths": ['),
            (None, b'[1, 2]'),
            ({'source_paths': 'a', 'destination': dest}, None),
            ({'source_paths': [1], 'destination': dest}, None),
            ({'source_paths': srcs, 'destination': 7}, None),
            ({'source_paths': [], 'destination': dest}, None),
            ({'destination': dest}, None),
            ({'source_paths': srcs}, None),
            ({'source_paths': srcs, 'destination': ''}, None),
            ({'source_paths': [srcs[0], dest], 'destination': dest}, None),
            ({'source_paths': srcs, 'destination': dest,
              'username': 5}, None),
        ]
        for body, raw in cases:
            st, r = self.compose(body, raw=raw)
            self.assertEqual((st, r['code']), (400, 400), (body, raw, r))
        st, r = self.compose({'source_paths': srcs, 'destination': dest,
                              'username': 'no-such-user-x'})
        self.assertEqual((st, r['code']), (401, 401), r)
        # A missing source, a folder as a source: nothing done.
        os.mkdir(self.p('dir'))
        for bad, code in ((self.p('missing'), 404), (self.p('dir'), 400)):
            st, r = self.compose({'source_paths': [srcs[0], bad, srcs[1]],
                                  'destination': dest})
            self.assertEqual((st, r['code']), (code, code), r)
            self.assertIn(bad, r['message'])
        self.assertFalse(os.path.exists(dest))
        for s in srcs:
            self.assertTrue(os.path.exists(s), s)
        # Without the token: 401, nothing done.
        st, r = self.compose({'source_paths': srcs, 'destination': dest},
                             token=False)
        self.assertEqual(st, 401, r)
        self.assertFalse(os.path.exists(dest))
        # The destination by another name: refused, nothing lost.
        with open(dest, 'wb') as fh:
            fh.write(b'kept')
        os.symlink(self.root, self.p('alias'))
        for alias in (self.p('.', 'out'), self.p('alias', 'out')):
            st, r = self.compose({'source_paths': [srcs[0], alias],
                                  'destination': dest})
            self.assertEqual(st, 400, (alias, r))
        with open(dest, 'rb') as fh:
            self.assertEqual(fh.read(), b'kept')
        os.unlink(dest)
        os.unlink(self.p('alias'))
        # A destination that is a folder: refused, sources kept.
        st, r = self.compose({'source_paths': srcs,
                              'destination': self.p('dir')})
        self.assertEqual(st, 400, r)
        self.assertEqual(os.listdir(self.p('dir')), [])
        for s in srcs:
            self.assertTrue(os.path.exists(s), s)


class TestComposeLimits(ComposeCase):
    """--envd-compose-sources, and the file system's room (507)."""

    extra = ('--envd-compose-sources', '3')

    def test_sources_bound(self):
        srcs = self.make(b'a', b'b', b'c', b'd')
        st, r = self.compose({'source_paths': srcs,
                              'destination': self.p('out')})
        self.assertEqual((st, r['code']), (400, 400), r)
        self.assertIn('--envd-compose-sources', r['message'])
        st, r = self.compose({'source_paths': srcs[:3],
                              'destination': self.p('out')})
        self.assertEqual(st, 200, r)
        self.assertEqual(self.metric(
            'agentd_envd_compose_refused_total{reason="sources"}'), 1)
        self.assertEqual(self.metric('agentd_envd_compose_sources_max'), 3)

    @unittest.skipUnless(ROOT, 'needs root (a small tmpfs)')
    def test_no_room(self):
        os.mkdir(self.p('small'))
        if os.system('mount -t tmpfs -o size=1m tmpfs %s 2>/dev/null' %
                     self.p('small')) != 0:
            self.skipTest('cannot mount a tmpfs')
        self.addCleanup(os.system, 'umount %s' % self.p('small'))
        srcs = self.make(bytes(700 << 10), bytes(700 << 10))
        dest = self.p('small', 'out')
        st, r = self.compose({'source_paths': srcs, 'destination': dest})
        self.assertEqual((st, r['code']), (507, 507), r)
        self.assertEqual(os.listdir(self.p('small')), [])
        for s in srcs:
            self.assertTrue(os.path.exists(s), s)


@unittest.skipUnless(ROOT, 'needs root (another user)')
class TestComposeUser(ComposeCase):
    """As envd: as root, what it makes given to the user."""

    def test_given_to_the_user(self):
        nobody = pwd.getpwnam('nobody')
        srcs = self.make(b'x', b'y')
        dest = self.p('made', 'f')
        st, r = self.compose({'source_paths': srcs, 'destination': dest,
                              'username': 'nobody'})
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('made')).st_uid, nobody.pw_uid)
        self.assertEqual(os.stat(dest).st_uid, nobody.pw_uid)


@unittest.skipUnless(ROOT, 'needs root (another user)')
class TestComposeConfined(ComposeCase):
    """--envd-confine-files 1: as the user, with its rights only."""

    extra = ('--envd-confine-files', '1')

    def test_confined(self):
        nobody = pwd.getpwnam('nobody')
        srcs = self.make(b'x', b'y')
        st, r = self.compose({'source_paths': srcs,
                              'destination': self.p('out'),
                              'username': 'nobody'})
        self.assertEqual((st, r['code']), (403, 403), r)
        self.assertFalse(os.path.exists(self.p('out')))
        for s in srcs:
            self.assertTrue(os.path.exists(s), s)
        os.mkdir(self.p('own'))
        os.chown(self.p('own'), nobody.pw_uid, nobody.pw_gid)
        st, r = self.compose({'source_paths': srcs,
                              'destination': self.p('own', 'out'),
                              'username': 'nobody'})
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('own', 'out')).st_uid, nobody.pw_uid)
        with open(self.p('own', 'out'), 'rb') as fh:
            self.assertEqual(fh.read(), b'xy')
        # The sources, in a root folder, stay: the user cannot remove them.
        for s in srcs:
            self.assertTrue(os.path.exists(s), s)


class RangeCase(FilesCase):

    DATA = bytes(range(256)) * 40        # 10240 bytes

    def setUp(self):
        super().setUp()
        self.f = self.p('data.bin')
        with open(self.f, 'wb') as fh:
            fh.write(self.DATA)
        os.utime(self.f, (1700000000, 1700000000))
        self.lm = email.utils.formatdate(1700000000, usegmt=True)

    def get(self, headers=None, path=None):
        return self.http('GET', '/files?path=' +
                         urllib.parse.quote(path or self.f), None, headers)


class TestRange(RangeCase):

    def test_ranges(self):
        n = len(self.DATA)
        st, h, body = self.get()
        self.assertEqual((st, body), (200, self.DATA))
        self.assertEqual(h['Accept-Ranges'], 'bytes')
        self.assertEqual(h['Last-Modified'], self.lm)
        self.assertEqual(h['Vary'], 'Accept-Encoding')
        for rng, lo, hi in (('bytes=0-9', 0, 9), ('bytes=100-', 100, n - 1),
                            ('bytes=-10', n - 10, n - 1),
                            ('bytes=-99999', 0, n - 1),
                            ('bytes=10-99999', 10, n - 1),
                            ('bytes= 5 - 6 ', 5, 6)):
            st, h, body = self.get({'Range': rng})
            self.assertEqual(st, 206, rng)
            self.assertEqual(h['Content-Range'], 'bytes %d-%d/%d' %
                             (lo, hi, n), rng)
            self.assertEqual(body, self.DATA[lo:hi + 1], rng)
            self.assertEqual(int(h['Content-Length']), hi - lo + 1)
        # Past the end: 416 with the size.
        for rng in ('bytes=%d-' % n, 'bytes=99999-100000'):
            st, h, _ = self.get({'Range': rng})
            self.assertEqual(st, 416, rng)
            self.assertEqual(h['Content-Range'], 'bytes */%d' % n)
        # Malformed: 416 (Go's "invalid range").
        for rng in ('items=0-1', 'bytes=5-1', 'bytes=abc', 'bytes=--1',
                    'bytes=1'):
            st, h, _ = self.get({'Range': rng})
            self.assertEqual(st, 416, rng)
        # An empty file: any range is past its end.
        empty = self.p('empty')
        open(empty, 'w').close()
        st, h, _ = self.get({'Range': 'bytes=0-'}, empty)
        self.assertEqual((st, h.get('Content-Range')), (416, 'bytes */0'))

    def parts(self, h, body):
        """A multipart/byteranges body: [(Content-Range, bytes)]."""
        ctype, _, b = h['Content-Type'].partition('; boundary=')
        self.assertEqual(ctype, 'multipart/byteranges')
        self.assertEqual(int(h['Content-Length']), len(body))
        self.assertTrue(body.startswith(b'--' + b.encode() + b'\r\n'))
        self.assertTrue(body.endswith(b'\r\n--' + b.encode() + b'--\r\n'))
        out = []
        for part in body.split(b'--' + b.encode())[1:-1]:
            head, _, data = part.partition(b'\r\n\r\n')
            lines = head.decode().strip().split('\r\n')
            self.assertEqual(lines[1], 'Content-Type: application/octet-stream')
            out.append((lines[0][len('Content-Range: '):],
                        data[:-2] if data.endswith(b'\r\n') else data))
        return out

    def test_multi(self):
        n = len(self.DATA)
        st, h, body = self.get({'Range': 'bytes=0-1, 100-102,-3'})
        self.assertEqual(st, 206)
        self.assertEqual(self.parts(h, body), [
            ('bytes 0-1/%d' % n, self.DATA[:2]),
            ('bytes 100-102/%d' % n, self.DATA[100:103]),
            ('bytes %d-%d/%d' % (n - 3, n - 1, n), self.DATA[-3:])])
        # One range past the end among others: left out.
        st, h, body = self.get({'Range': 'bytes=0-1,%d-' % n})
        self.assertEqual((st, h['Content-Range'], body),
                         (206, 'bytes 0-1/%d' % n, self.DATA[:2]))
        # More bytes than the file together: the whole file, 200.
        st, h, body = self.get({'Range': 'bytes=0-,0-'})
        self.assertEqual((st, body), (200, self.DATA))
        self.assertNotIn('Content-Range', h)
        # A pseudo-file (read whole): one range, and several.
        with open('/proc/version', 'rb') as fh:
            ver = fh.read()
        st, h, body = self.get({'Range': 'bytes=0-4'}, '/proc/version')
        self.assertEqual((st, body), (206, ver[:5]))
        st, h, body = self.get({'Range': 'bytes=0-0,2-3'}, '/proc/version')
        self.assertEqual(self.parts(h, body), [
            ('bytes 0-0/%d' % len(ver), ver[:1]),
            ('bytes 2-3/%d' % len(ver), ver[2:4])])

    def test_conditional(self):
        old = email.utils.formatdate(1600000000, usegmt=True)
        new = email.utils.formatdate(1800000000, usegmt=True)
        st, h, body = self.get({'If-Modified-Since': self.lm})
        self.assertEqual((st, body), (304, b''))
        st, _, body = self.get({'If-Modified-Since': old})
        self.assertEqual((st, body), (200, self.DATA))
        st, _, _ = self.get({'If-None-Match': '*'})
        self.assertEqual(st, 304)
        # If-None-Match present: If-Modified-Since is not looked at.
        st, _, _ = self.get({'If-None-Match': '"x"',
                             'If-Modified-Since': self.lm})
        self.assertEqual(st, 200)
        st, _, _ = self.get({'If-Unmodified-Since': old})
        self.assertEqual(st, 412)
        st, _, _ = self.get({'If-Unmodified-Since': new})
        self.assertEqual(st, 200)
        st, _, _ = self.get({'If-Match': '"x"'})
        self.assertEqual(st, 412)
        st, _, _ = self.get({'If-Match': '*'})
        self.assertEqual(st, 200)
        # If-Range: the date that matches keeps the range; else all.
        st, _, body = self.get({'Range': 'bytes=0-3', 'If-Range': self.lm})
        self.assertEqual((st, body), (206, self.DATA[:4]))
        st, _, body = self.get({'Range': 'bytes=0-3', 'If-Range': old})
        self.assertEqual((st, body), (200, self.DATA))
        st, _, body = self.get({'Range': 'bytes=0-3', 'If-Range': '"etag"'})
        self.assertEqual((st, body), (200, self.DATA))


class TestGzip(RangeCase):

    def test_gzip(self):
        for ae in ('gzip', 'GZIP', 'br, gzip;q=0.5', 'gzip;q=1, identity;q=0.5',
                   'identity;q=0, *'):
            st, h, body = self.get({'Accept-Encoding': ae})
            self.assertEqual(st, 200, ae)
            self.assertEqual(h.get('Content-Encoding'), 'gzip', ae)
            self.assertEqual(h['Vary'], 'Accept-Encoding')
            self.assertNotIn('Content-Length', h)
            self.assertEqual(gzip.decompress(body), self.DATA, ae)
        for ae in ('identity', 'br', 'gzip;q=0', 'gzip;q=0.4, identity',
                   '*', ''):
            st, h, body = self.get({'Accept-Encoding': ae})
            self.assertEqual((st, body), (200, self.DATA), ae)
            self.assertNotIn('Content-Encoding', h, ae)
        for ae in ('identity;q=0', '*;q=0', 'br, identity;q=0'):
            st, _, body = self.get({'Accept-Encoding': ae})
            self.assertEqual(st, 406, (ae, body))
            self.assertEqual(json.loads(body)['code'], 406)
        # Range with gzip asked: identity (envd's), 406 if it is refused.
        st, h, body = self.get({'Accept-Encoding': 'gzip', 'Range':
                                'bytes=0-3'})
        self.assertEqual((st, body), (206, self.DATA[:4]))
        self.assertNotIn('Content-Encoding', h)
        st, _, _ = self.get({'Accept-Encoding': 'gzip, identity;q=0',
                             'Range': 'bytes=0-3'})
        self.assertEqual(st, 406)
        # A missing file is 404 before the encoding is looked at.
        st, _, _ = self.get({'Accept-Encoding': 'identity;q=0'},
                            self.p('missing'))
        self.assertEqual(st, 404)
        # A big file streams; an empty one is a gzip of nothing.
        big = self.p('big')
        data = os.urandom(1 << 20) + bytes(2 << 20)
        with open(big, 'wb') as fh:
            fh.write(data)
        st, _, body = self.get({'Accept-Encoding': 'gzip'}, big)
        self.assertEqual((st, gzip.decompress(body)), (200, data))
        empty = self.p('empty')
        open(empty, 'w').close()
        st, h, body = self.get({'Accept-Encoding': 'gzip'}, empty)
        self.assertEqual((st, h.get('Content-Encoding')), (200, 'gzip'))
        self.assertEqual(gzip.decompress(body), b'')
        # What repeats is smaller.
        text = b''.join(b'line %d of a log, level=info\n' % (i % 500)
                        for i in range(20000))
        with open(big, 'wb') as fh:
            fh.write(text)
        st, _, body = self.get({'Accept-Encoding': 'gzip'}, big)
        self.assertEqual(gzip.decompress(body), text)
        self.assertLess(len(body), len(text) // 3)
        # A pseudo-file too.
        with open('/proc/version', 'rb') as fh:
            ver = fh.read()
        st, h, body = self.get({'Accept-Encoding': 'gzip'}, '/proc/version')
        self.assertEqual((st, gzip.decompress(body)), (200, ver))


if __name__ == '__main__':
    unittest.main()
