"""envd's filesystem.Filesystem and GET/POST /files on --envd-listen, over
the wire: Connect unary calls and streams, EntryInfo as envd fills it, the
/files bodies (multipart, octet-stream, gzip), signed URLs, and the same
refusals of symlinks and hard links as agentd's own /v1/files."""

import base64
import gzip
import hashlib
import http.client
import json
import os
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from harness import AgentdTestCase, free_port

TIMEOUT = 10
HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(os.path.dirname(HERE), 'node', 'node_modules')


def take_envelopes(buf):
    """The whole envelopes at buf's start: ([(flags, JSON)], the rest)."""
    out = []
    while len(buf) >= 5:
        flags, ln = struct.unpack('>BI', buf[:5])
        if len(buf) < 5 + ln:
            break
        out.append((flags, json.loads(buf[5:5 + ln])))
        buf = buf[5 + ln:]
    return out, buf


class EnvdFsCase(AgentdTestCase):
    """An agentd with a token and an envd listener; a folder under its dir."""

    extra = ()

    def setUp(self):
        self.eport = free_port()
        self.agentd_args = ('--envd-listen',
                            '127.0.0.1:%d' % self.eport) + self.extra
        super().setUp()
        self.root = os.path.join(self.agentd.dir, 'fs')
        os.mkdir(self.root)

    def p(self, *names):
        return os.path.join(self.root, *names)

    def http(self, method, path, body=None, headers=None, token=True):
        hdrs = dict(headers or {})
        if token:
            hdrs['X-Access-Token'] = self.agentd.token
        conn = http.client.HTTPConnection('127.0.0.1', self.eport,
                                          timeout=TIMEOUT)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def rpc(self, method, msg, headers=None, raw=None):
        """A unary call: (status, decoded JSON answer)."""
        h = {'Content-Type': 'application/json'}
        h.update(headers or {})
        body = raw if raw is not None else json.dumps(msg).encode()
        status, _, data = self.http('POST', '/filesystem.Filesystem/' + method,
                                    body, h)
        return status, json.loads(data) if data else None

    def stream(self, method, msg, headers=None):
        """Open a server stream; returns the socket, head already read."""
        body = json.dumps(msg).encode()
        env = struct.pack('>BI', 0, len(body)) + body
        s = socket.create_connection(('127.0.0.1', self.eport), timeout=TIMEOUT)
        h = ''.join('%s: %s\r\n' % kv for kv in (headers or {}).items())
        s.sendall(('POST /filesystem.Filesystem/%s HTTP/1.1\r\nHost: '
                   'localhost\r\nContent-Type: application/connect+json\r\n'
                   'X-Access-Token: %s\r\n%sContent-Length: %d\r\n\r\n'
                   % (method, self.agentd.token, h, len(env))).encode() + env)
        f = s.makefile('rb')
        line = f.readline()
        self.assertIn(b' 200 ', line)
        f.length = None
        while True:
            line = f.readline()
            if line in (b'\r\n', b''):
                break
            k, _, v = line.decode().partition(':')
            if k.lower() == 'content-length':
                f.length = int(v)
        return s, f

    @staticmethod
    def envelopes(f, n=None, until_end=True):
        """Read envelopes (chunked, or of a Content-Length): (flags, JSON)."""
        out, buf = [], b''
        while n is None or len(out) < n:
            if f.length is not None:
                if f.length == 0:
                    break
                buf += f.read(f.length)
                f.length = 0
            else:
                size = int(f.readline().strip(), 16)
                if size == 0:
                    break
                buf += f.read(size)
                f.readline()
            got, buf = take_envelopes(buf)
            for m in got:
                out.append(m)
                if m[0] & 2 and until_end:
                    return out
        return out


class TestFilesystem(EnvdFsCase):

    def test_entry_info_and_unary_methods(self):
        os.mkdir(self.p('d'))
        with open(self.p('d', 'a.txt'), 'w') as f:
            f.write('hello')
        os.chmod(self.p('d', 'a.txt'), 0o640)
        os.symlink('a.txt', self.p('d', 'ln'))
        os.makedirs(self.p('d', 'sub', 'deep'))
        st, r = self.rpc('Stat', {'path': self.p('d', 'a.txt')})
        self.assertEqual(st, 200, r)
        e = r['entry']
        me = pwd.getpwuid(os.getuid()).pw_name
        self.assertEqual(e['name'], 'a.txt')
        self.assertEqual(e['type'], 'FILE_TYPE_FILE')
        self.assertEqual(e['path'], self.p('d', 'a.txt'))
        self.assertEqual(e['size'], '5')            # int64: a string
        self.assertEqual(e['mode'], 0o640)
        self.assertEqual(e['permissions'], '-rw-r-----')
        self.assertEqual(e['owner'], me)
        self.assertRegex(e['modifiedTime'],
                         r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$')
        self.assertNotIn('symlinkTarget', e)
        # A symlink: lstat's size and permissions, the target's type/mode.
        st, r = self.rpc('Stat', {'path': self.p('d', 'ln')})
        e = r['entry']
        self.assertEqual((e['type'], e['permissions'], e['mode']),
                         ('FILE_TYPE_FILE', 'Lrwxrwxrwx', 0o640))
        self.assertEqual(e['symlinkTarget'], self.p('d', 'a.txt'))
        # ListDir: sorted, depth 1 by default, WalkDir's order at depth 2.
        st, r = self.rpc('ListDir', {'path': self.p('d')})
        self.assertEqual([x['name'] for x in r['entries']],
                         ['a.txt', 'ln', 'sub'])
        st, r = self.rpc('ListDir', {'path': self.p('d'), 'depth': 2})
        self.assertEqual([x['path'][len(self.p('d')) + 1:] for x in r['entries']],
                         ['a.txt', 'ln', 'sub', 'sub/deep'])
        st, r = self.rpc('ListDir', {'path': self.p('d', 'a.txt')})
        self.assertEqual((st, r['code']), (400, 'invalid_argument'))
        st, r = self.rpc('ListDir', {'path': self.p('nope')})
        self.assertEqual((st, r['code']), (404, 'not_found'))
        # MakeDir: the folders on the way; already_exists the second time.
        st, r = self.rpc('MakeDir', {'path': self.p('m', 'n')})
        self.assertEqual((st, r['entry']['type']), (200, 'FILE_TYPE_DIRECTORY'))
        st, r = self.rpc('MakeDir', {'path': self.p('m', 'n')})
        self.assertEqual((st, r['code']), (409, 'already_exists'))
        st, r = self.rpc('MakeDir', {'path': self.p('d', 'a.txt')})
        self.assertEqual((st, r['code']), (400, 'invalid_argument'))
        # Move makes the destination's folders.
        st, r = self.rpc('Move', {'source': self.p('d', 'a.txt'),
                                  'destination': self.p('x', 'y', 'b.txt')})
        self.assertEqual((st, r['entry']['path']), (200, self.p('x', 'y', 'b.txt')))
        st, r = self.rpc('Move', {'source': self.p('d', 'a.txt'),
                                  'destination': self.p('c.txt')})
        self.assertEqual((st, r['code']), (404, 'not_found'))
        # Remove: recursive; a missing path is fine (envd's RemoveAll).
        st, r = self.rpc('Remove', {'path': self.p('d')})
        self.assertEqual((st, r), (200, {}))
        self.assertFalse(os.path.exists(self.p('d')))
        st, r = self.rpc('Remove', {'path': self.p('d')})
        self.assertEqual(st, 200)
        st, r = self.rpc('Stat', {'path': self.p('d')})
        self.assertEqual((st, r['code']), (404, 'not_found'))
        # "~" is the user's home.
        st, r = self.rpc('Stat', {'path': '~'})
        self.assertEqual(r['entry']['path'], pwd.getpwuid(os.getuid()).pw_dir)

    def test_bad_requests(self):
        for method, msg in (('Stat', {'path': 5}), ('ListDir', {'path': '/',
                            'depth': 'deep'}), ('Move', {'source': []}),
                            ('WatchDir', None)):
            if msg is None:
                continue
            st, r = self.rpc(method, msg)
            self.assertEqual((st, r['code']), (400, 'invalid_argument'), method)
        st, r = self.rpc('Stat', None, raw=b'{"path":')
        self.assertEqual(st, 400)
        st, r = self.rpc('Stat', {'path': '~other/x'})
        self.assertEqual((st, r['code']), (400, 'invalid_argument'))
        st, r = self.rpc('Remove', {'path': '/'})
        self.assertEqual((st, r['code']), (400, 'invalid_argument'))
        st, r = self.rpc('GetWatcherEvents', {'watcherId': 'wnope'})
        self.assertEqual((st, r['code']), (404, 'not_found'))
        st, _, _ = self.http('POST', '/filesystem.Filesystem/Stat',
                             json.dumps({'path': '/'}),
                             {'Content-Type': 'application/json'}, token=False)
        self.assertEqual(st, 401)

    def test_remove_under_a_missing_folder(self):
        # R5-9: the folder is gone too: envd's RemoveAll says nothing; the
        # answer had no body and agentd ended (fatal in envd_reply).
        for path in (self.p('gone', 'x'), self.p('gone', 'y', 'z')):
            st, r = self.rpc('Remove', {'path': path})
            self.assertEqual((st, r), (200, {}), path)
        st, _, _ = self.http('GET', '/health')
        self.assertEqual(st, 204)
        self.assertTrue(self.agentd.alive())

    def test_watch_dir_stream(self):
        os.mkdir(self.p('w'))
        s, f = self.stream('WatchDir', {'path': self.p('w'), 'recursive': True},
                           {'Keepalive-Ping-Interval': '1',
                            'Connect-Timeout-Ms': '3000'})
        try:
            first = self.envelopes(f, 1)
            self.assertEqual(first, [(0, {'start': {}})])
            os.makedirs(self.p('w', 'sub'))
            time.sleep(0.2)             # the new folder's watch
            with open(self.p('w', 'sub', 'f'), 'w') as fh:
                fh.write('x')
            os.chmod(self.p('w', 'sub', 'f'), 0o600)
            os.rename(self.p('w', 'sub', 'f'), self.p('w', 'g'))
            os.remove(self.p('w', 'g'))
            got = self.envelopes(f)
        finally:
            s.close()
        evs = [(m['filesystem']['name'], m['filesystem']['type'])
               for _, m in got if 'filesystem' in m]
        for want in [('sub', 'EVENT_TYPE_CREATE'), ('sub/f', 'EVENT_TYPE_CREATE'),
                     ('sub/f', 'EVENT_TYPE_WRITE'), ('sub/f', 'EVENT_TYPE_CHMOD'),
                     ('sub/f', 'EVENT_TYPE_RENAME'), ('g', 'EVENT_TYPE_CREATE'),
                     ('g', 'EVENT_TYPE_REMOVE')]:
            self.assertIn(want, evs)
        self.assertIn((0, {'keepalive': {}}), got)
        # Connect-Timeout-Ms ends the stream deadline_exceeded.
        self.assertEqual(got[-1][0], 2)
        self.assertEqual(got[-1][1]['error']['code'], 'deadline_exceeded')

    def test_watch_errors_and_watchers(self):
        with open(self.p('file'), 'w'):
            pass
        for path, code in ((self.p('file'), 'invalid_argument'),
                           (self.p('none'), 'not_found')):
            s, f = self.stream('WatchDir', {'path': path})
            try:
                got = self.envelopes(f)
            finally:
                s.close()
            self.assertEqual(len(got), 1)
            self.assertEqual(got[0][0], 2)
            self.assertEqual(got[0][1]['error']['code'], code)
        os.mkdir(self.p('cw'))
        st, r = self.rpc('CreateWatcher', {'path': self.p('cw'),
                                           'includeEntry': True})
        self.assertEqual(st, 200, r)
        wid = r['watcherId']
        with open(self.p('cw', 'n.txt'), 'w') as fh:
            fh.write('abc')
        time.sleep(0.2)
        st, r = self.rpc('GetWatcherEvents', {'watcher_id': wid})
        self.assertEqual(st, 200, r)
        types = [(e['name'], e['type']) for e in r['events']]
        self.assertIn(('n.txt', 'EVENT_TYPE_CREATE'), types)
        self.assertEqual(r['events'][0]['entry']['name'], 'n.txt')
        st, r = self.rpc('GetWatcherEvents', {'watcherId': wid})
        self.assertEqual((st, r), (200, {}))
        st, r = self.rpc('RemoveWatcher', {'watcherId': wid})
        self.assertEqual((st, r), (200, {}))
        st, r = self.rpc('RemoveWatcher', {'watcherId': wid})
        self.assertEqual((st, r['code']), (404, 'not_found'))

    def test_names_not_utf8(self):
        """A file name that is not UTF-8 keeps its name and path (its bad
        bytes as U+FFFD), in ListDir and in POST /files' answer."""
        os.mkdir(self.p('u'))
        open(os.path.join(os.fsencode(self.p('u')), b'\xff\xfe'), 'w').close()
        st, r = self.rpc('ListDir', {'path': self.p('u')})
        self.assertEqual(st, 200, r)
        self.assertEqual(r['entries'][0]['name'], '\ufffd\ufffd')
        self.assertEqual(r['entries'][0]['path'],
                         self.p('u') + '/\ufffd\ufffd')
        q = urllib.parse.quote(os.fsencode(self.p('u')) + b'/\xff\xfd')
        st, _, data = self.http('POST', '/files?path=' + q, b'x',
                                {'Content-Type': 'application/octet-stream'})
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data)[0]['name'], '\ufffd\ufffd')

    def test_watch_entry_of_a_symlink(self):
        """includeEntry: the entry is taken beneath the watched folder and a
        symlink's target is not looked at (agentd stats as root there)."""
        os.mkdir(self.p('we'))
        st, r = self.rpc('CreateWatcher', {'path': self.p('we'),
                                           'includeEntry': True})
        self.assertEqual(st, 200, r)
        wid = r['watcherId']
        os.symlink('/etc/shadow', self.p('we', 'l'))
        with open(self.p('we', 'f'), 'w') as fh:
            fh.write('x')
        time.sleep(0.2)
        st, r = self.rpc('GetWatcherEvents', {'watcherId': wid})
        self.assertEqual(st, 200, r)
        got = {e['name']: e for e in r['events']
               if e['type'] == 'EVENT_TYPE_CREATE'}
        self.assertNotIn('entry', got['l'])
        self.assertEqual(got['f']['entry']['path'], self.p('we', 'f'))
        self.rpc('RemoveWatcher', {'watcherId': wid})

    def test_no_fd_left(self):
        """Streams whose client left, removed watchers, failed calls: agentd
        holds no more fds (inotify, folders) after them than before."""
        os.makedirs(self.p('z', 'a', 'b'))
        fds = lambda: len(os.listdir('/proc/%d/fd' % self.agentd.proc.pid))
        st, r = self.rpc('Stat', {'path': self.p('z')})    # warm up
        time.sleep(0.3)                 # its connection closed
        before = fds()
        for _ in range(5):
            s, f = self.stream('WatchDir', {'path': self.p('z'),
                                            'recursive': True})
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            f.close()
            s.close()                   # the client goes away mid-stream
            st, r = self.rpc('CreateWatcher', {'path': self.p('z'),
                                               'recursive': True})
            st, r = self.rpc('RemoveWatcher', {'watcherId': r['watcherId']})
            self.assertEqual(st, 200)
            st, r = self.rpc('ListDir', {'path': self.p('z'), 'depth': 3})
            self.assertEqual(len(r['entries']), 2)
            st, r = self.rpc('Stat', {'path': self.p('nope')})
            self.assertEqual(st, 404)
        deadline = time.monotonic() + 5
        while fds() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(fds(), before)


class TestListLimits(EnvdFsCase):
    """ListDir goes down at most 64 levels, and stops at --envd-max-message
    while it walks."""

    extra = ('--envd-max-message', '65536')

    def test_depth_and_size(self):
        fd = os.open(self.root, os.O_RDONLY)
        try:
            for _ in range(100):
                os.mkdir('d', dir_fd=fd)
                nfd = os.open('d', os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = nfd
        finally:
            os.close(fd)
        t = time.monotonic()
        st, r = self.rpc('ListDir', {'path': self.root, 'depth': 1000})
        self.assertEqual(st, 200, r)
        self.assertEqual(len(r['entries']), 64)         # clamped
        self.assertLess(time.monotonic() - t, 5)
        os.mkdir(self.p('many'))
        for i in range(300):
            open(self.p('many', '%03d' % i + 'x' * 200), 'w').close()
        st, r = self.rpc('ListDir', {'path': self.p('many')})
        self.assertEqual((st, r['code']), (429, 'resource_exhausted'))
        self.assertIn('--envd-max-message', r['message'])
        self.assertTrue(self.agentd.alive())


class TestWatchLimits(EnvdFsCase):
    """--envd-watchers, --envd-watch-events and --envd-watch-dirs."""

    extra = ('--envd-watchers', '1', '--envd-watch-events', '3',
             '--envd-watch-dirs', '3')

    def test_limits(self):
        for d in ('a', 'b', 'c', 'd'):
            os.makedirs(self.p('w', d))
        st, r = self.rpc('CreateWatcher', {'path': self.p('w'),
                                           'recursive': True})
        self.assertEqual((st, r['code']), (429, 'resource_exhausted'))
        self.assertIn('--envd-watch-dirs', r['message'])
        st, r = self.rpc('CreateWatcher', {'path': self.p('w')})
        self.assertEqual(st, 200, r)
        wid = r['watcherId']
        st, r = self.rpc('CreateWatcher', {'path': self.p('w')})
        self.assertEqual((st, r['code']), (429, 'resource_exhausted'))
        for i in range(5):
            with open(self.p('w', 'f%d' % i), 'w'):
                pass
        time.sleep(0.2)
        st, r = self.rpc('GetWatcherEvents', {'watcherId': wid})
        self.assertEqual((st, r['code']), (429, 'resource_exhausted'))
        self.assertIn('--envd-watch-events', r['message'])
        st, r = self.rpc('RemoveWatcher', {'watcherId': wid})
        self.assertEqual(st, 200)
        st, r = self.rpc('CreateWatcher', {'path': self.p('w')})
        self.assertEqual(st, 200, r)
        st, r = self.rpc('RemoveWatcher', {'watcherId': r['watcherId']})
        self.assertEqual(st, 200, r)
        # A recursive stream that grows past --envd-watch-dirs ends with it.
        os.makedirs(self.p('v', 'a'))
        s, f = self.stream('WatchDir', {'path': self.p('v'),
                                        'recursive': True})
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            for d in ('b', 'c', 'd'):
                os.mkdir(self.p('v', d))
            got = self.envelopes(f)
        finally:
            s.close()
        self.assertEqual(got[-1][0], 2, got)
        self.assertIn('--envd-watch-dirs', got[-1][1]['error']['message'])
        st, r = self.rpc('Stat', {'path': self.root})
        self.assertEqual(st, 200, r)
        self.assertTrue(self.agentd.alive())


def multipart(parts, boundary='b0undary'):
    out = b''
    for name, filename, data in parts:
        disp = 'form-data; name="%s"' % name
        if filename is not None:
            disp += '; filename="%s"' % filename
        out += ('--%s\r\nContent-Disposition: %s\r\nContent-Type: '
                'application/octet-stream\r\n\r\n' % (boundary, disp)).encode()
        out += data + b'\r\n'
    out += ('--%s--\r\n' % boundary).encode()
    return out, 'multipart/form-data; boundary=' + boundary


class TestFilesRoutes(EnvdFsCase):

    def files(self, method, body=None, ctype=None, headers=None, token=True,
              **query):
        h = dict(headers or {})
        if ctype:
            h['Content-Type'] = ctype
        return self.http(method, '/files?' + urllib.parse.urlencode(query),
                         body, h, token=token)

    def test_post_and_get(self):
        body, ct = multipart([('file', self.p('a', 'one.txt'), b'one'),
                              ('other', None, b'ignored'),
                              ('file', self.p('two.bin'), bytes(range(256)))])
        st, _, data = self.files('POST', body, ct)
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data), [
            {'name': 'one.txt', 'type': 'file', 'path': self.p('a', 'one.txt')},
            {'name': 'two.bin', 'type': 'file', 'path': self.p('two.bin')}])
        st, h, data = self.files('GET', path=self.p('two.bin'))
        self.assertEqual((st, data), (200, bytes(range(256))))
        # octet-stream, and a file there keeps its mode.
        os.chmod(self.p('two.bin'), 0o600)
        st, _, data = self.files('POST', b'raw', 'application/octet-stream',
                                 path=self.p('two.bin'))
        self.assertEqual(st, 200, data)
        self.assertEqual(os.stat(self.p('two.bin')).st_mode & 0o777, 0o600)
        with open(self.p('two.bin'), 'rb') as fh:
            self.assertEqual(fh.read(), b'raw')
        # gzip bodies, octet-stream and multipart.
        big = os.urandom(1 << 20)
        st, _, data = self.files('POST', gzip.compress(big),
                                 'application/octet-stream',
                                 {'Content-Encoding': 'gzip'},
                                 path=self.p('gz.bin'))
        self.assertEqual(st, 200, data)
        st, _, data = self.files('GET', path=self.p('gz.bin'))
        self.assertEqual(hashlib.sha256(data).digest(),
                         hashlib.sha256(big).digest())
        body, ct = multipart([('file', 'ignored', b'zipped part')])
        st, _, data = self.files('POST', gzip.compress(body), ct,
                                 {'Content-Encoding': 'gzip'},
                                 path=self.p('gzpart.txt'))
        self.assertEqual(st, 200, data)
        with open(self.p('gzpart.txt'), 'rb') as fh:
            self.assertEqual(fh.read(), b'zipped part')

    def test_post_errors(self):
        cases = [
            (multipart([('x', 'f', b'1')]), 400),            # no file part
            (multipart([('file', self.p('d.txt'), b'1'),
                        ('file', self.p('d.txt'), b'2')]), 400),   # twice
            (multipart([('file', None, b'1')]), 400),        # no filename
            ((b'--b0undary\r\nContent-Disposition: form-data; name="file"; '
              b'filename="x"\r\n\r\ncut', 'multipart/form-data; '
              'boundary=b0undary'), 400),                     # no end
            ((b'x', 'multipart/form-data'), 400),             # no boundary
            ((b'x', 'text/plain'), 400),
            ((b'x', 'application/octet-stream'), 400),        # no path
        ]
        for (body, ct), want in cases:
            st, _, data = self.files('POST', body, ct)
            self.assertEqual(st, want, (body, data))
            self.assertEqual(json.loads(data)['code'], want)
        st, _, data = self.files('POST', b'not gzip', 'application/octet-stream',
                                 {'Content-Encoding': 'gzip'}, path=self.p('z'))
        self.assertEqual(st, 400, data)
        st, _, data = self.files('POST', b'x', 'application/octet-stream',
                                 {'Content-Encoding': 'br'}, path=self.p('z'))
        self.assertEqual(st, 400, data)
        # envd's answer to the same path twice: the first file is written.
        with open(self.p('d.txt'), 'rb') as fh:
            self.assertEqual(fh.read(), b'1')
        os.remove(self.p('d.txt'))
        self.assertEqual(os.listdir(self.root), [])    # nothing left behind
        st, _, data = self.files('GET', path=self.p('none'))
        self.assertEqual((st, json.loads(data)['code']), (404, 404))
        st, _, data = self.files('GET', path=self.root)
        self.assertEqual(st, 400)
        st, _, data = self.files('GET', path=self.p('none'),
                                 username='no-such-user-here')
        self.assertEqual(st, 401)

    def test_signed_urls(self):
        with open(self.p('s.txt'), 'w') as fh:
            fh.write('signed')
        path = self.p('s.txt')

        def sign(op, exp=None, user=''):
            raw = '%s:%s:%s:%s' % (path, op, user, self.agentd.token)
            if exp is not None:
                raw += ':%d' % exp
            d = hashlib.sha256(raw.encode()).digest()
            return 'v1_' + base64.b64encode(d).decode().rstrip('=')

        st, _, _ = self.files('GET', token=False, path=path)
        self.assertEqual(st, 401)
        st, _, data = self.files('GET', token=False, path=path,
                                 signature=sign('read'))
        self.assertEqual((st, data), (200, b'signed'))
        exp = int(time.time()) + 60
        st, _, data = self.files('GET', token=False, path=path,
                                 signature=sign('read', exp),
                                 signature_expiration=exp)
        self.assertEqual((st, data), (200, b'signed'))
        st, _, _ = self.files('GET', token=False, path=path,
                              signature=sign('read', exp - 120),
                              signature_expiration=exp - 120)
        self.assertEqual(st, 401)                      # expired
        st, _, _ = self.files('GET', token=False, path=path,
                              signature=sign('write'))
        self.assertEqual(st, 401)                      # another operation
        st, _, data = self.files('POST', b'new', 'application/octet-stream',
                                 token=False, path=path,
                                 signature=sign('write'))
        self.assertEqual(st, 200, data)
        # Signed without username: the default user, whatever Basic says.
        st, _, _ = self.http('POST', '/init',
                             json.dumps({'defaultUser': 'nobody'}).encode(),
                             {'Content-Type': 'application/json'})
        self.assertEqual(st, 204)
        os.chmod(self.agentd.dir, 0o711)
        os.chmod(self.root, 0o777)
        path = self.p('by-nobody.txt')
        st, _, data = self.files('POST', b'n', 'application/octet-stream',
                                 token=False, path=path,
                                 signature=sign('write'),
                                 headers={'Authorization': 'Basic cm9vdDo='})
        self.assertEqual(st, 200, data)
        self.assertEqual(os.stat(path).st_uid, pwd.getpwnam('nobody').pw_uid)


class TestBigUploads(EnvdFsCase):
    """POST /files bodies over --max-body (8 MiB) go to an unlinked file in
    --envd-spool-dir, not the heap, up to --envd-max-upload (here 64 MiB):
    with Content-Length or chunked, octet-stream, multipart or gzip; a client
    gone mid-body leaves no fd and no file; over the limit 413, a full spool
    507 (envd's shape); without the token nothing is spooled."""

    SIZE = 20 << 20

    def setUp(self):
        self.spool = tempfile.mkdtemp(prefix='agentd-spool-')
        self.addCleanup(shutil.rmtree, self.spool, True)
        self.extra = ('--envd-spool-dir', self.spool,
                      '--envd-max-upload', str(64 << 20))
        super().setUp()

    def fds(self):
        return sorted(os.listdir('/proc/%d/fd' % self.agentd.proc.pid),
                      key=int)

    def deleted(self):
        """agentd's fds on deleted files (a spool left open)."""
        out = []
        for fd in self.fds():
            try:
                t = os.readlink('/proc/%d/fd/%s' % (self.agentd.proc.pid, fd))
            except OSError:
                continue
            if t.endswith(' (deleted)') or t.startswith(self.spool):
                out.append(t)
        return out

    def post(self, query, body, ctype, chunked=False, token=True,
             headers=None):
        """A raw POST /files: (status, JSON answer)."""
        h = {'Host': 'localhost', 'Content-Type': ctype}
        if token:
            h['X-Access-Token'] = self.agentd.token
        h.update(headers or {})
        if chunked:
            h['Transfer-Encoding'] = 'chunked'
        else:
            h['Content-Length'] = str(len(body))
        head = ('POST /files?%s HTTP/1.1\r\n' % urllib.parse.urlencode(query) +
                ''.join('%s: %s\r\n' % kv for kv in h.items()) + '\r\n')
        s = socket.create_connection(('127.0.0.1', self.eport), timeout=30)
        try:
            s.sendall(head.encode())
            if chunked:
                step = 1 << 20
                for i in range(0, len(body), step):
                    part = body[i:i + step]
                    s.sendall(b'%x;ext=1\r\n' % len(part) + part + b'\r\n')
                s.sendall(b'0\r\nX-Trailer: 1\r\n\r\n')
            else:
                s.sendall(body)
            f = s.makefile('rb')
            status = int(f.readline().split()[1])
            n = 0
            while True:
                line = f.readline()
                if line in (b'\r\n', b''):
                    break
                k, _, v = line.decode().partition(':')
                if k.lower() == 'content-length':
                    n = int(v)
            return status, json.loads(f.read(n))
        finally:
            s.close()

    def test_octet_stream_and_multipart(self):
        data = os.urandom(self.SIZE)
        for chunked in (False, True):
            name = self.p('raw%d.bin' % chunked)
            st, r = self.post({'path': name}, data,
                              'application/octet-stream', chunked)
            self.assertEqual(st, 200, r)
            self.assertEqual(r, [{'name': os.path.basename(name),
                                  'type': 'file', 'path': name}])
            with open(name, 'rb') as fh:
                self.assertTrue(fh.read() == data, name)
            body, ct = multipart([('file', self.p('m%d.bin' % chunked), data),
                                  ('file', self.p('small%d' % chunked), b's')])
            st, r = self.post({}, body, ct, chunked)
            self.assertEqual(st, 200, r)
            self.assertEqual(len(r), 2)
            with open(self.p('m%d.bin' % chunked), 'rb') as fh:
                self.assertTrue(fh.read() == data)
            with open(self.p('small%d' % chunked), 'rb') as fh:
                self.assertEqual(fh.read(), b's')
        # A gzip body inflated past --max-body, octet-stream and multipart.
        body, ct = multipart([('file', self.p('gzm.bin'), data[:1 << 20] *
                               12)])
        st, r = self.post({}, gzip.compress(body, 1), ct,
                          headers={'Content-Encoding': 'gzip'})
        self.assertEqual(st, 200, r)
        with open(self.p('gzm.bin'), 'rb') as fh:
            self.assertTrue(fh.read() == data[:1 << 20] * 12)
        st, r = self.post({'path': self.p('gz.bin')}, gzip.compress(data, 1),
                          'application/octet-stream', True,
                          headers={'Content-Encoding': 'gzip'})
        self.assertEqual(st, 200, r)
        with open(self.p('gz.bin'), 'rb') as fh:
            self.assertTrue(fh.read() == data)
        # Errors of the body itself still come from envfiles.c.
        st, r = self.post({}, b'x' * self.SIZE, 'multipart/form-data; '
                          'boundary=b0undary', True)
        self.assertEqual((st, r['code']), (400, 400), r)
        self.assertEqual(os.listdir(self.spool), [])
        self.assertEqual(self.deleted(), [])

    def test_expect_continue(self):
        """curl sends Expect: 100-continue and waits for it: the gate, which
        holds the head back from evhttp, answers it."""
        data = os.urandom(9 << 20)
        s = socket.create_connection(('127.0.0.1', self.eport), timeout=10)
        try:
            s.sendall(('POST /files?path=%s HTTP/1.1\r\nHost: localhost\r\n'
                       'X-Access-Token: %s\r\nContent-Type: application/'
                       'octet-stream\r\nExpect: 100-continue\r\n'
                       'Content-Length: %d\r\n\r\n' % (
                           self.p('cont'), self.agentd.token,
                           len(data))).encode())
            f = s.makefile('rb')
            self.assertEqual(f.readline(), b'HTTP/1.1 100 Continue\r\n')
            self.assertEqual(f.readline(), b'\r\n')
            s.sendall(data)
            self.assertIn(b' 200 ', f.readline())
        finally:
            s.close()
        with open(self.p('cont'), 'rb') as fh:
            self.assertTrue(fh.read() == data)

    def test_client_gone_and_limits(self):
        st, r = self.post({'path': self.p('warm')}, b'w',
                          'application/octet-stream')
        self.assertEqual(st, 200)
        time.sleep(0.3)
        before = self.fds()
        for chunked in (False, True):
            s = socket.create_connection(('127.0.0.1', self.eport))
            head = ('POST /files?path=%s HTTP/1.1\r\nHost: localhost\r\n'
                    'X-Access-Token: %s\r\nContent-Type: application/'
                    'octet-stream\r\n' % (self.p('gone'), self.agentd.token))
            head += ('Transfer-Encoding: chunked\r\n\r\n' if chunked else
                     'Content-Length: %d\r\n\r\n' % self.SIZE)
            s.sendall(head.encode())
            part = b'x' * (10 << 20)
            s.sendall(b'%x\r\n' % len(part) + part if chunked else part)
            time.sleep(0.3)
            self.assertTrue(self.deleted(), 'no spool while the body comes')
            s.close()
        deadline = time.monotonic() + 5
        while (not set(self.fds()) <= set(before) and
               time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertLessEqual(set(self.fds()), set(before))
        self.assertEqual(self.deleted(), [])
        self.assertEqual(os.listdir(self.spool), [])
        self.assertFalse(os.path.exists(self.p('gone')))
        self.assertEqual(sorted(os.listdir(self.root)), ['warm'])
        # Over --envd-max-upload: 413 at the head, or past it when chunked.
        big = b'y' * ((64 << 20) + 1)
        for chunked in (False, True):
            st, r = self.post({'path': self.p('over')}, big,
                              'application/octet-stream', chunked)
            self.assertEqual((st, r['code']), (413, 413), r)
            self.assertIn('--envd-max-upload', r['message'])
        self.assertFalse(os.path.exists(self.p('over')))
        # Without the token (a signed URL's client) --max-body holds: 413
        # at the head, nothing spooled; chunked, past 8 MiB.
        for chunked in (False, True):
            st, r = self.post({'path': self.p('anon')}, b'z' * self.SIZE,
                              'application/octet-stream', chunked, False)
            self.assertEqual(st, 413, r)
            self.assertIn('--max-body', json.dumps(r))
        self.assertEqual(self.deleted(), [])
        self.assertEqual(os.listdir(self.spool), [])


class TestSpoolTimeout(EnvdFsCase):
    """A spooled body that stalls is cut --header-timeout after its last
    bytes: the spool goes with the connection."""

    extra = ('--header-timeout', '1000')

    def test_stalled_body(self):
        pid = self.agentd.proc.pid
        fds = lambda: sorted(os.listdir('/proc/%d/fd' % pid), key=int)

        def spools():
            out = []
            for fd in fds():
                try:
                    t = os.readlink('/proc/%d/fd/%s' % (pid, fd))
                except OSError:
                    continue
                if t.endswith(' (deleted)'):
                    out.append(t)
            return out

        time.sleep(0.3)                 # the harness's own connections closed
        before = fds()
        s = socket.create_connection(('127.0.0.1', self.eport), timeout=10)
        try:
            s.sendall(('POST /files?path=%s HTTP/1.1\r\nHost: localhost\r\n'
                       'X-Access-Token: %s\r\nContent-Type: application/'
                       'octet-stream\r\nContent-Length: %d\r\n\r\n' % (
                           self.p('slow'), self.agentd.token,
                           20 << 20)).encode())
            for _ in range(3):      # progress keeps it: 1.5 s in all
                s.sendall(b'x' * (4 << 20))
                time.sleep(0.5)
            self.assertEqual(len(spools()), 1)      # still open
            s.settimeout(5)
            try:
                self.assertEqual(s.recv(1), b'')    # then 1 s of nothing
            except ConnectionResetError:
                pass
        finally:
            s.close()
        deadline = time.monotonic() + 5
        while not set(fds()) <= set(before) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(set(fds()), set(before))
        self.assertEqual(spools(), [])
        self.assertFalse(os.path.exists(self.p('slow')))


class TestSpoolFull(EnvdFsCase):
    """A Content-Length larger than the spool's free room: 507 at once."""

    extra = ('--envd-max-upload', str(1 << 50))

    def test_507(self):
        s = socket.create_connection(('127.0.0.1', self.eport), timeout=10)
        try:
            s.sendall(('POST /files?path=%s HTTP/1.1\r\nHost: localhost\r\n'
                       'X-Access-Token: %s\r\nContent-Type: application/'
                       'octet-stream\r\nContent-Length: %d\r\n\r\n' % (
                           self.p('full'), self.agentd.token,
                           1 << 49)).encode())
            data = s.makefile('rb').read()
        finally:
            s.close()
        self.assertIn(b' 507 ', data.split(b'\r\n')[0])
        r = json.loads(data.split(b'\r\n\r\n', 1)[1])
        self.assertEqual(r['code'], 507)
        self.assertIn('--envd-spool-dir', r['message'])


@unittest.skipUnless(os.geteuid() == 0, 'needs root (another user\'s files)')
class TestRefusals(EnvdFsCase):
    """Symlinks of another user on the way and hard links to another user's
    file are refused as /v1/files refuses them."""

    def setUp(self):
        super().setUp()
        self.nobody = pwd.getpwnam('nobody')
        os.chmod(self.agentd.dir, 0o755)
        os.chmod(self.root, 0o755)
        os.mkdir(self.p('real'))
        with open(self.p('real', 'secret'), 'w') as fh:
            fh.write('s')
        os.symlink(self.p('real'), self.p('evil'))
        os.lchown(self.p('evil'), self.nobody.pw_uid, self.nobody.pw_gid)
        with open(self.p('theirs'), 'w') as fh:
            fh.write('t')
        os.chown(self.p('theirs'), self.nobody.pw_uid, self.nobody.pw_gid)
        os.link(self.p('theirs'), self.p('hard'))

    def test_symlink_of_another_user(self):
        via = self.p('evil', 'secret')
        for method, msg in (('Stat', {'path': via}),
                            ('ListDir', {'path': self.p('evil')}),
                            ('MakeDir', {'path': self.p('evil', 'n')}),
                            ('Remove', {'path': via}),
                            ('Move', {'source': via, 'destination': self.p('m')})):
            st, r = self.rpc(method, msg)
            self.assertEqual((st, r['code']), (403, 'permission_denied'), method)
        s, f = self.stream('WatchDir', {'path': self.p('evil')})
        try:
            got = self.envelopes(f)
        finally:
            s.close()
        self.assertEqual(got[0][1]['error']['code'], 'permission_denied')
        st, _, _ = self.http('GET', '/files?path=' + urllib.parse.quote(via))
        self.assertEqual(st, 403)
        st, _, _ = self.http('POST', '/files?path=' + urllib.parse.quote(via),
                             b'x', {'Content-Type': 'application/octet-stream'})
        self.assertEqual(st, 403)
        self.assertTrue(os.path.exists(self.p('real', 'secret')))
        # The symlink itself may be listed and stat'ed (lstat).
        st, r = self.rpc('Stat', {'path': self.p('evil')})
        self.assertEqual(r['entry']['permissions'][0], 'L')

    def test_hard_link_to_another_users_file(self):
        st, _, _ = self.http('GET', '/files?path=' + urllib.parse.quote(
            self.p('hard')))
        self.assertEqual(st, 403)
        st, _, _ = self.http('POST', '/files?path=' + urllib.parse.quote(
            self.p('hard')), b'x', {'Content-Type': 'application/octet-stream'})
        self.assertEqual(st, 403)
        st, r = self.rpc('Move', {'source': self.p('hard'),
                                  'destination': self.p('moved')})
        self.assertEqual((st, r['code']), (403, 'permission_denied'))
        # As the file's owner it is fine.
        st, _, data = self.http('GET', '/files?username=nobody&path=' +
                                urllib.parse.quote(self.p('hard')))
        self.assertEqual((st, data), (200, b't'))


class TestSdkFiles(EnvdFsCase):
    """The official E2B JS SDK's sandbox.files (sdk_files.mjs) in debug mode,
    at the defaults: the SDK sends an 8 MiB file as one multipart body, over
    --max-body, which the gate spools to disk."""

    def test_sdk_files(self):
        node = shutil.which('node')
        if node is None:
            raise unittest.SkipTest('node is not installed')
        self.assertTrue(os.path.isdir(os.path.join(NODE_MODULES, 'e2b')),
                        'tests/node/node_modules lacks e2b: run '
                        'build-aux/deps.sh test (npm ci in tests/node)')
        args = [self.p()]
        if os.geteuid() == 0:
            os.mkdir(self.p('real'))
            with open(self.p('real', 'secret'), 'w') as fh:
                fh.write('s')
            os.symlink(self.p('real'), self.p('evil'))
            nobody = pwd.getpwnam('nobody')
            os.lchown(self.p('evil'), nobody.pw_uid, nobody.pw_gid)
            os.mkdir(self.p('work'))
            args = [self.p('work'), self.p('evil')]
        else:
            os.mkdir(self.p('work'))
            args = [self.p('work')]
        tmp = tempfile.mkdtemp(prefix='agentd-envd-')
        try:
            shutil.copy(os.path.join(HERE, 'sdk_files.mjs'), tmp)
            os.symlink(NODE_MODULES, os.path.join(tmp, 'node_modules'))
            p = subprocess.run([node, os.path.join(tmp, 'sdk_files.mjs'),
                                'http://127.0.0.1:%d' % self.eport,
                                self.agentd.token] + args, cwd=tmp,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
        finally:
            shutil.rmtree(tmp)
        out = p.stdout.decode('utf-8', 'replace')
        self.assertEqual(p.returncode, 0, out + self.agentd.stderr())
        for name in ('write text', '8 MiB', '8 MiB gzip', 'list depth 2',
                     'watchDir', 'uploadUrl', 'read missing', 'write metadata',
                     'getInfo metadata', 'rename keeps metadata',
                     'overwrite clears metadata', 'write in place'):
            self.assertIn('ok ' + name + '\n', out)
        if os.geteuid() == 0:
            self.assertIn('ok write as envd\n', out)
