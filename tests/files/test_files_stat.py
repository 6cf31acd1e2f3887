"""POST /v1/files/stat: lstat semantics for many paths at once."""

import datetime
import os
import time
import unittest

from harness import TS_RE
from filesutil import FilesCase


def iso_ms(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)


class StatTest(FilesCase):

    def test_kinds(self):
        f = self.p('f')
        with open(f, 'wb') as fh:
            fh.write(b'twelve bytes')
        os.chmod(f, 0o640)
        d = self.p('d')
        os.mkdir(d, 0o751)
        os.chmod(d, 0o751)
        link = self.p('link')
        os.symlink(f, link)
        dangling = self.p('dangling')
        os.symlink(self.p('nowhere'), dangling)
        dirlink = self.p('dirlink')
        os.symlink(d, dirlink)
        fifo = self.p('fifo')
        os.mkfifo(fifo, 0o600)
        missing = self.p('missing')
        under_file = os.path.join(f, 'child')
        t = time.time() - 3600.5
        os.utime(f, (t, t))
        paths = [f, d, link, dangling, dirlink, fifo, missing, under_file, '/']
        r = self.expect(self.stat(paths), 200)
        res = r.json['results']
        self.assertEqual([x['path'] for x in res], paths)
        by = dict(zip(paths, res))

        a = by[f]
        self.assertIs(a['exists'], True)
        self.assertEqual(a['type'], 'file')
        self.assertEqual(a['size'], 12)
        self.assertEqual(a['mode'], '0640')
        self.assertRegex(a['mtime'], TS_RE)
        got = datetime.datetime.strptime(a['mtime'], '%Y-%m-%dT%H:%M:%S.%fZ') \
            .replace(tzinfo=datetime.timezone.utc)
        self.assertLess(abs((got - iso_ms(t)).total_seconds()), 0.002)
        self.assertEqual(a['uid'], os.getuid())
        self.assertEqual(a['gid'], os.getgid())
        self.assertNotIn('error', a)

        self.assertEqual(by[d]['type'], 'dir')
        self.assertEqual(by[d]['mode'], '0751')
        for l, target in ((link, f), (dangling, self.p('nowhere')), (dirlink, d)):
            self.assertIs(by[l]['exists'], True, l)
            self.assertEqual(by[l]['type'], 'symlink', l)   # lstat: not followed
            self.assertEqual(by[l]['mode'], '0777')
            self.assertEqual(by[l]['size'], len(target))
            self.assertEqual(by[l].get('target'), target)
        self.assertEqual(by[fifo]['type'], 'other')
        self.assertEqual(by[missing], {'path': missing, 'exists': False, 'error': 'ENOENT'})
        self.assertEqual(by[under_file]['exists'], False)
        self.assertEqual(by[under_file]['error'], 'ENOTDIR')
        self.assertEqual(by['/']['type'], 'dir')

    def test_trailing_slash(self):
        """"/a/b/" as lstat(2) takes it: b must be a folder, or a symlink
        to one (followed); a file there is ENOTDIR, not the file."""
        f = self.p('f')
        with open(f, 'wb') as fh:
            fh.write(b'x')
        d = self.p('d')
        os.mkdir(d)
        os.symlink(d, self.p('dirlink'))
        os.symlink(f, self.p('filelink'))
        paths = [f + '/', d + '/', self.p('dirlink') + '/',
                 self.p('filelink') + '/', self.p('missing') + '/']
        res = self.expect(self.stat(paths), 200).json['results']
        by = dict(zip(paths, res))
        for p in (f + '/', self.p('filelink') + '/'):
            self.assertEqual(by[p], {'path': p, 'exists': False,
                                     'error': 'ENOTDIR'}, p)
        for p in (d + '/', self.p('dirlink') + '/'):
            self.assertIs(by[p]['exists'], True, p)
            self.assertEqual(by[p]['type'], 'dir', p)
            self.assertNotIn('target', by[p])
        self.assertEqual(by[self.p('missing') + '/']['error'], 'ENOENT')

    def test_odd_names(self):
        names = ['sp ace', 'ü-ñ', 'quote"back\\slash', 'new\nline', 'pct%41']
        paths = []
        for n in names:
            path = self.p(n)
            with open(path, 'wb') as fh:
                fh.write(n.encode())
            paths.append(path)
        r = self.expect(self.stat(paths), 200)
        for path, x in zip(paths, r.json['results']):
            self.assertEqual(x['path'], path)
            self.assertEqual(x['size'], len(os.path.basename(path).encode()))
        # and the same names through GET and PUT's query
        for path in paths:
            self.expect(self.put(path, b'new ' + path.encode()), 200)
            self.assertEqual(self.get_file(path).body, b'new ' + path.encode())

    def test_limits(self):
        self.expect(self.stat([]), 200)
        self.assertEqual(self.stat([]).json, {'results': []})
        r = self.expect(self.stat([self.root] * 1000), 200)
        self.assertEqual(len(r.json['results']), 1000)
        self.assertError(self.stat([self.root] * 1001), 400, 'invalid_request', 'paths')

    def test_bad_requests(self):
        cases = [
            ({'paths': 'x'}, 'paths'),
            ({'paths': [1]}, 'paths[0]'),
            ({'paths': ['/ok', 'relative']}, 'paths[1]'),
            ({'paths': ['']}, 'paths[0]'),
            ({}, 'paths'),
            ({'paths': ['/'], 'extra': 1}, 'extra'),
        ]
        for body, field in cases:
            self.assertError(self.req('POST', '/v1/files/stat', body), 400,
                             'invalid_request', field)
        self.assertError(self.req('POST', '/v1/files/stat', b'{"paths": [',
                                  headers={'Content-Type': 'application/json'}),
                         400, 'invalid_json')
        self.assertError(self.req('POST', '/v1/files/stat', b''), 400, 'invalid_json')


if __name__ == '__main__':
    unittest.main()
