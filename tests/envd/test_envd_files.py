"""envd's file calls acting as envd's do (as root, what they make given to
the call's user) or confined (--envd-confine-files 1, as the user), over
the wire: writes in place, the modes a write keeps, the bound on inflated
gzip bodies, file metadata (X-Metadata-* as user.e2b.* xattrs) and
agentd's own /proc.  The parts with another user need root (they use
'nobody')."""

import base64
import gzip
import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from test_envd_fs import EnvdFsCase, multipart

ROOT = os.geteuid() == 0
NOBODY = 'Basic ' + base64.b64encode(b'nobody:').decode()


class FilesCase(EnvdFsCase):
    """EnvdFsCase with /files helpers; the folder open to every user."""

    def setUp(self):
        super().setUp()
        os.chmod(self.agentd.dir, 0o755)
        os.chmod(self.root, 0o755)

    def post(self, path, body, ctype='application/octet-stream',
             headers=None, token=True, **query):
        if path is not None:
            query['path'] = path
        h = {'Content-Type': ctype}
        h.update(headers or {})
        st, _, data = self.http('POST', '/files?' +
                                urllib.parse.urlencode(query), body, h,
                                token=token)
        return st, json.loads(data) if data else None

    def sign(self, path, op='write', user=''):
        raw = '%s:%s:%s:%s' % (path, op, user, self.agentd.token)
        d = hashlib.sha256(raw.encode()).digest()
        return 'v1_' + base64.b64encode(d).decode().rstrip('=')

    def watch_events(self, folder, action, wait=0.5):
        """Run action() under a WatchDir of folder: [(name, type)]."""
        s, f = self.stream('WatchDir', {'path': folder},
                           {'Connect-Timeout-Ms': str(int(wait * 1000) + 800)})
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            action()
            got = self.envelopes(f)
        finally:
            s.close()
        return [(m['filesystem']['name'], m['filesystem']['type'])
                for _, m in got if 'filesystem' in m]


class TestInPlace(FilesCase):
    """Issue 42 item 2: a write on the envd listener lands in place."""

    def test_new_file_then_overwrite(self):
        os.mkdir(self.p('w'))
        name = self.p('w', 'new.txt')
        evs = self.watch_events(self.p('w'), lambda: self.assertEqual(
            self.post(name, b'first')[0], 200))
        # A new file: CREATE, then WRITE, of the file itself, nothing else.
        self.assertEqual(evs[:2], [('new.txt', 'EVENT_TYPE_CREATE'),
                                   ('new.txt', 'EVENT_TYPE_WRITE')], evs)
        self.assertEqual({n for n, _ in evs}, {'new.txt'}, evs)
        ino = os.stat(name).st_ino
        evs = self.watch_events(self.p('w'), lambda: self.assertEqual(
            self.post(name, b'second')[0], 200))
        self.assertIn(('new.txt', 'EVENT_TYPE_WRITE'), evs)
        self.assertEqual({n for n, _ in evs}, {'new.txt'}, evs)
        self.assertEqual(os.stat(name).st_ino, ino)     # the same file
        with open(name, 'rb') as fh:
            self.assertEqual(fh.read(), b'second')
        self.assertEqual(os.listdir(self.p('w')), ['new.txt'])

    def test_agentd_put_stays_atomic(self):
        name = self.p('atomic.txt')
        with open(name, 'w') as fh:
            fh.write('old')
        ino = os.stat(name).st_ino
        r = self.req('PUT', '/v1/files?path=' + urllib.parse.quote(name),
                     b'new')
        self.assertEqual(r.status, 200, r)
        self.assertNotEqual(os.stat(name).st_ino, ino)


@unittest.skipUnless(ROOT, 'needs root (another user\'s files)')
class TestPlantedMode(FilesCase):
    """R5-1: a write acting as U never keeps set-id or group/other write
    bits of a file there that U does not own (in place, as envd's)."""

    def test_root_write_over_a_planted_file(self):
        nobody = pwd.getpwnam('nobody')
        os.chmod(self.root, 0o1777)
        for name in ('tool', 'tool2'):
            path = self.p(name)
            with open(path, 'w') as fh:
                fh.write('planted')
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
            os.chmod(path, 0o6777)
        st, r = self.post(self.p('tool'), b'#!/bin/sh\n')
        self.assertEqual(st, 200, r)
        s = os.stat(self.p('tool'))
        self.assertEqual(s.st_uid, 0)
        self.assertEqual(stat.S_IMODE(s.st_mode) & 0o6022, 0, oct(s.st_mode))
        # Multipart too.
        body, ct = multipart([('file', self.p('tool2'), b'x')])
        st, r = self.post(None, body, ct)
        self.assertEqual(st, 200, r)
        s = os.stat(self.p('tool2'))
        self.assertEqual(stat.S_IMODE(s.st_mode) & 0o6022, 0, oct(s.st_mode))
        # A file of the acting user keeps its mode.
        with open(self.p('mine'), 'w') as fh:
            fh.write('m')
        os.chmod(self.p('mine'), 0o4751)
        self.assertEqual(self.post(self.p('mine'), b'y')[0], 200)
        self.assertEqual(stat.S_IMODE(os.stat(self.p('mine')).st_mode),
                         0o4751)


class TestGzipBound(FilesCase):
    """R5-2: what a gzip body inflates to is bounded: --envd-max-upload
    with the token, --max-body allowed by a signature alone; past it 413
    and nothing at the path; a signed-only body is never spooled."""

    def setUp(self):
        self.spool = tempfile.mkdtemp(prefix='agentd-spool-')
        self.addCleanup(shutil.rmtree, self.spool, True)
        self.extra = ('--max-body', '1MiB', '--envd-max-upload', '4MiB',
                      '--envd-spool-dir', self.spool)
        super().setUp()

    def test_bounds(self):
        os.rmdir(self.spool)            # signed only: no spool wanted
        big = gzip.compress(bytes(8 << 20))
        mid = gzip.compress(bytes(2 << 20))
        path = self.p('bomb')
        st, r = self.post(path, big, headers={'Content-Encoding': 'gzip'},
                          token=False, signature=self.sign(path))
        self.assertEqual((st, r['code']), (413, 413), r)
        self.assertIn('--max-body', r['message'])
        self.assertFalse(os.path.exists(path))
        # 2 MiB inflated: over --max-body, signed only.
        st, r = self.post(path, mid, headers={'Content-Encoding': 'gzip'},
                          token=False, signature=self.sign(path))
        self.assertEqual(st, 413, r)
        self.assertFalse(os.path.exists(path))
        # A small signed gzip multipart body: in memory, not spooled.
        body, ct = multipart([('file', 'ignored', b'zipped')])
        small = self.p('small')
        st, r = self.post(small, gzip.compress(body), ct, token=False,
                          headers={'Content-Encoding': 'gzip'},
                          signature=self.sign(small))
        self.assertEqual(st, 200, r)
        with open(small, 'rb') as fh:
            self.assertEqual(fh.read(), b'zipped')
        # With the token: on the spool, up to --envd-max-upload.
        os.mkdir(self.spool)
        st, r = self.post(path, mid, headers={'Content-Encoding': 'gzip'})
        self.assertEqual(st, 200, r)
        self.assertEqual(os.path.getsize(path), 2 << 20)
        st, r = self.post(path, big, headers={'Content-Encoding': 'gzip'})
        self.assertEqual(st, 413, r)
        self.assertIn('--envd-max-upload', r['message'])
        self.assertEqual(os.path.getsize(path), 2 << 20)   # left as it was


class TestMetadata(FilesCase):
    """Issue 42 item 4: X-Metadata-<key> headers as user.e2b.<key>."""

    def meta(self, path):
        return {n[len('user.e2b.'):]: os.getxattr(path, n).decode()
                for n in os.listxattr(path) if n.startswith('user.e2b.')}

    def test_metadata(self):
        path = self.p('d', 'm.txt')
        st, r = self.post(path, b'body', headers={
            'X-Metadata-Author': 'mish', 'x-metadata-purpose': 'upload'})
        self.assertEqual(st, 200, r)
        want = {'author': 'mish', 'purpose': 'upload'}
        self.assertEqual(r[0]['metadata'], want)
        self.assertEqual(self.meta(path), want)
        st, r = self.rpc('Stat', {'path': path})
        self.assertEqual(r['entry']['metadata'], want)
        st, r = self.rpc('ListDir', {'path': self.p('d')})
        self.assertEqual(r['entries'][0]['metadata'], want)
        st, r = self.rpc('Move', {'source': path,
                                  'destination': self.p('d', 'n.txt')})
        self.assertEqual(r['entry']['metadata'], want)
        path = self.p('d', 'n.txt')
        # Set by other means: shown too.
        os.setxattr(path, 'user.e2b.other', b'v')
        st, r = self.rpc('Stat', {'path': path})
        self.assertEqual(r['entry']['metadata']['other'], 'v')
        # Every upload replaces the whole set; none clears it.
        st, r = self.post(path, b'2', headers={'X-Metadata-Tag': 'one'})
        self.assertEqual(r[0]['metadata'], {'tag': 'one'})
        self.assertEqual(self.meta(path), {'tag': 'one'})
        st, r = self.post(path, b'3')
        self.assertNotIn('metadata', r[0])
        st, r = self.rpc('Stat', {'path': path})
        self.assertNotIn('metadata', r['entry'])
        self.assertEqual(self.meta(path), {})
        # Multipart: each file gets it.
        body, ct = multipart([('file', self.p('d', 'a'), b'a'),
                              ('file', self.p('d', 'b'), b'b')])
        st, r = self.post(None, body, ct, headers={'X-Metadata-S': 'x'})
        self.assertEqual([e['metadata'] for e in r], [{'s': 'x'}] * 2)

    def test_bad_metadata_leaves_the_file(self):
        path = self.p('keep.txt')
        with open(path, 'w') as fh:
            fh.write('kept')
        os.setxattr(path, 'user.e2b.k', b'v')
        for h in ({'X-Metadata-K': 'caf\u00e9'.encode('latin-1')},
                  {'X-Metadata-' + 'k' * 247: 'v'},
                  {'X-Metadata-A': 'v' * 4000, 'X-Metadata-B': 'v' * 100}):
            st, r = self.post(path, b'new', headers=h)
            self.assertEqual((st, r['code']), (400, 400), h)
            with open(path) as fh:
                self.assertEqual(fh.read(), 'kept')
            self.assertEqual(self.meta(path), {'k': 'v'})
        # The largest key passes.
        k = 'k' * 246
        st, r = self.post(path, b'new', headers={'X-Metadata-' + k: 'v'})
        self.assertEqual(st, 200, r)
        self.assertEqual(list(r[0]['metadata']), [k])

    @unittest.skipUnless(ROOT, 'needs root (mounts a ramfs)')
    def test_no_user_xattrs(self):
        mnt = self.p('ramfs')
        os.mkdir(mnt)
        if subprocess.run(['mount', '-t', 'ramfs', 'ramfs', mnt],
                          stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest('cannot mount a ramfs here')
        try:
            st, r = self.post(os.path.join(mnt, 'f'), b'body',
                              headers={'X-Metadata-K': 'v'})
            self.assertEqual(st, 200, r)
            self.assertNotIn('metadata', r[0])
            with open(os.path.join(mnt, 'f'), 'rb') as fh:
                self.assertEqual(fh.read(), b'body')
        finally:
            subprocess.run(['umount', '-l', mnt])

    def test_watch_entry_has_metadata(self):
        os.mkdir(self.p('w'))
        path = self.p('w', 'f')
        with open(path, 'w') as fh:
            fh.write('x')
        s, f = self.stream('WatchDir', {'path': self.p('w'),
                                        'includeEntry': True},
                           {'Connect-Timeout-Ms': '1500'})
        try:
            self.envelopes(f, 1)
            os.setxattr(path, 'user.e2b.w', b'1')
            got = self.envelopes(f)
        finally:
            s.close()
        entries = [m['filesystem'].get('entry') for _, m in got
                   if 'filesystem' in m]
        self.assertIn({'w': '1'}, [e.get('metadata') for e in entries if e])


@unittest.skipUnless(ROOT, 'needs root (another user)')
class TestEnvdMode(FilesCase):
    """Issue 42 item 3: as envd's calls, as root: missing folders are made
    and given to the call's user, as is the file; the user's own symlink
    never sends a root write elsewhere."""

    def test_made_for_the_user(self):
        nobody = pwd.getpwnam('nobody')
        st, r = self.post(self.p('a', 'b', 'c.txt'), b'x', username='nobody')
        self.assertEqual(st, 200, r)
        for p in (self.p('a'), self.p('a', 'b'), self.p('a', 'b', 'c.txt')):
            self.assertEqual(os.stat(p).st_uid, nobody.pw_uid, p)
        # An existing root file there is given to the user.
        with open(self.p('rootfile'), 'w') as fh:
            fh.write('r')
        st, r = self.post(self.p('rootfile'), b'y', username='nobody')
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('rootfile')).st_uid, nobody.pw_uid)
        h = {'Authorization': NOBODY}
        st, r = self.rpc('MakeDir', {'path': self.p('m', 'n')}, h)
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('m')).st_uid, nobody.pw_uid)
        self.assertEqual(os.stat(self.p('m', 'n')).st_uid, nobody.pw_uid)
        st, r = self.rpc('Move', {'source': self.p('a', 'b', 'c.txt'),
                                  'destination': self.p('x', 'y', 'c.txt')}, h)
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('x', 'y')).st_uid, nobody.pw_uid)
        # A root-only folder is read as root.
        os.mkdir(self.p('private'), 0o700)
        st, r = self.rpc('ListDir', {'path': self.p('private')}, h)
        self.assertEqual(st, 200, r)
        st, _, data = self.http('GET', '/files?username=nobody&path=' +
                                urllib.parse.quote(self.p('rootfile')))
        self.assertEqual((st, data), (200, b'y'))
        with open(self.p('private', 'secret'), 'w') as fh:
            fh.write('s')
        os.chmod(self.p('private', 'secret'), 0o600)
        st, _, data = self.http('GET', '/files?username=nobody&path=' +
                                urllib.parse.quote(self.p('private', 'secret')))
        self.assertEqual((st, data), (200, b's'))

    def test_users_symlink_does_not_redirect(self):
        nobody = pwd.getpwnam('nobody')
        os.mkdir(self.p('etc'), 0o755)
        with open(self.p('etc', 'passwd'), 'w') as fh:
            fh.write('root')
        os.mkdir(self.p('home'))
        os.chown(self.p('home'), nobody.pw_uid, nobody.pw_gid)
        os.symlink(self.p('etc'), self.p('home', 'cfg'))
        os.lchown(self.p('home', 'cfg'), nobody.pw_uid, nobody.pw_gid)
        st, r = self.post(self.p('home', 'cfg', 'passwd'), b'owned',
                          username='nobody')
        self.assertEqual(st, 403, r)
        self.assertEqual(os.stat(self.p('etc', 'passwd')).st_uid, 0)
        with open(self.p('etc', 'passwd')) as fh:
            self.assertEqual(fh.read(), 'root')
        st, r = self.post(self.p('home', 'cfg', 'new'), b'x',
                          username='nobody')
        self.assertEqual(st, 403, r)
        self.assertFalse(os.path.exists(self.p('etc', 'new')))
        # Where the user may write, its symlink works (acting as it).
        os.mkdir(self.p('home', 'real'))
        os.chown(self.p('home', 'real'), nobody.pw_uid, nobody.pw_gid)
        os.symlink(self.p('home', 'real'), self.p('home', 'ln'))
        os.lchown(self.p('home', 'ln'), nobody.pw_uid, nobody.pw_gid)
        st, r = self.post(self.p('home', 'ln', 'f'), b'x', username='nobody')
        self.assertEqual(st, 200, r)
        self.assertEqual(os.stat(self.p('home', 'real', 'f')).st_uid,
                         nobody.pw_uid)


@unittest.skipUnless(ROOT, 'needs root (another user)')
class TestConfined(FilesCase):
    """--envd-confine-files 1: file calls act as the call's user (the
    behaviour before issue 42), agentd's own /proc refused (R5-7)."""

    extra = ('--envd-confine-files', '1')

    def test_confined(self):
        st, r = self.post(self.p('a', 'c.txt'), b'x', username='nobody')
        self.assertEqual(st, 403, r)
        self.assertFalse(os.path.exists(self.p('a')))
        h = {'Authorization': NOBODY}
        st, r = self.rpc('MakeDir', {'path': self.p('m')}, h)
        self.assertEqual((st, r['code']), (403, 'permission_denied'))
        with open(self.p('secret'), 'w') as fh:
            fh.write('s')
        os.chmod(self.p('secret'), 0o600)
        st, _, _ = self.http('GET', '/files?username=nobody&path=' +
                             urllib.parse.quote(self.p('secret')))
        self.assertEqual(st, 403)
        # In a folder of its own: the user's file, its metadata read as it.
        nobody = pwd.getpwnam('nobody')
        os.mkdir(self.p('own'))
        os.chown(self.p('own'), nobody.pw_uid, nobody.pw_gid)
        st, r = self.post(self.p('own', 'f'), b'x', username='nobody',
                          headers={'X-Metadata-K': 'v'})
        self.assertEqual((st, r[0]['metadata']), (200, {'k': 'v'}), r)
        self.assertEqual(os.stat(self.p('own', 'f')).st_uid, nobody.pw_uid)
        st, r = self.rpc('ListDir', {'path': self.p('own')}, h)
        self.assertEqual(r['entries'][0]['metadata'], {'k': 'v'}, r)

    def test_own_proc(self):
        pid = self.agentd.proc.pid
        h = {'Authorization': NOBODY}
        for method, msg in (
                ('ListDir', {'path': '/proc/%d/fd' % pid}),
                ('ListDir', {'path': '/proc/%d/map_files' % pid}),
                ('ListDir', {'path': '/proc/%d/task/%d/fd' % (pid, pid)}),
                ('Stat', {'path': '/proc/%d/fd/0' % pid}),
                ('Stat', {'path': '/proc/%d/environ' % pid})):
            st, r = self.rpc(method, msg, h)
            self.assertEqual((st, r['code']), (403, 'permission_denied'),
                             (method, msg, r))
        # Another process's, as the user may: fine.
        st, r = self.rpc('Stat', {'path': '/proc/%d' % os.getpid()}, h)
        self.assertEqual(st, 200, r)


if __name__ == '__main__':
    unittest.main()
