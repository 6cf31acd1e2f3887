"""envd's directory watches (WatchDir, CreateWatcher) over the wire: the
loop stays responsive while a user renames folders under a recursive watch,
a watch reports nothing from folders its user cannot read, its memory
follows the folders it follows now, the watched folder's removal ends it as
envd's does, watches are counted against --envd-watchers, and agentd stops
cleanly with envd streams open.

Run: AGENTD=build/agentd/agentd /usr/bin/python3 tests/run.py tests/envd/test_envd_watch.py
"""

import base64
import http.client
import json
import os
import pwd
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

from harness import SLOW
from test_envd_fs import EnvdFsCase, TIMEOUT, take_envelopes

ROOT_ONLY = unittest.skipUnless(os.geteuid() == 0,
                                'needs root (another user, its folders)')


def basic(user):
    return {'Authorization': 'Basic ' +
            base64.b64encode(user.encode() + b':').decode()}


class WatchCase(EnvdFsCase):
    """Helpers: a stream drained by a thread, /healthz, /metrics."""

    def drain(self, f):
        """Read a stream's envelopes on a thread into a list, as they come
        (a chunked body); the thread ends with the stream."""
        got = []

        def run():
            buf = b''
            try:
                while True:
                    size = int(f.readline().strip(), 16)
                    if size == 0:
                        return
                    buf += f.read(size)
                    f.readline()
                    more, buf = take_envelopes(buf)
                    got.extend(more)
            except (OSError, ValueError):
                pass
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return got, t

    def healthz(self):
        t = time.monotonic()
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=60)
        try:
            c.request('GET', '/healthz')
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        finally:
            c.close()
        return time.monotonic() - t

    def metric(self, name):
        c = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                       timeout=TIMEOUT)
        try:
            c.request('GET', '/metrics', headers={
                'Authorization': 'Bearer ' + self.agentd.token})
            body = c.getresponse().read().decode()
        finally:
            c.close()
        for line in body.splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        self.fail('no metric %s' % name)

    @staticmethod
    def events(got):
        return [(m['filesystem']['name'], m['filesystem']['type'])
                for _, m in got if 'filesystem' in m]

    def as_nobody(self, *paths):
        nb = pwd.getpwnam('nobody')
        for p in paths:
            os.chown(p, nb.pw_uid, nb.pw_gid)
        return nb


@ROOT_ONLY
class WatchStormTest(WatchCase):
    """R5-4: a non-root user renaming a folder of 2,000 folders back and
    forth under a recursive watch (as the SDK's watchDir(path, cb,
    {recursive: true}) on the workspace) does not freeze the loop: each
    rename moves the subtree's watches, no walk.  Before, every rename
    walked the 2,000 folders on the loop and one callback drained the
    whole queue: /healthz waited 30 s and more."""

    def test_rename_storm(self):
        os.chmod(self.agentd.dir, 0o755)
        nb = self.as_nobody(self.root)
        os.mkdir(self.p('a'))
        for i in range(2000):
            os.mkdir(self.p('a', str(i)))
        for dirpath, dirs, _ in os.walk(self.root):
            for d in dirs:
                os.chown(os.path.join(dirpath, d), nb.pw_uid, nb.pw_gid)
        s, f = self.stream('WatchDir', {'path': self.root, 'recursive': True},
                           basic('nobody'))
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            got, t = self.drain(f)
            code = ('import os, sys, time\n'
                    'r, end = sys.argv[1], time.monotonic() + 3\n'
                    'src, dst = "a", "b"\n'
                    'while time.monotonic() < end:\n'
                    '    os.rename(r + "/" + src, r + "/" + dst)\n'
                    '    src, dst = dst, src\n')

            def demote():
                os.setgid(nb.pw_gid)
                os.setuid(nb.pw_uid)
            p = subprocess.Popen([sys.executable, '-c', code, self.root],
                                 preexec_fn=demote)
            lat = []
            while p.poll() is None:
                lat.append(self.healthz())
                time.sleep(0.01)
            lat.append(self.healthz())
            self.assertEqual(p.wait(), 0)
            lat.sort()
            sys.stderr.write('healthz during the storm: %d probes, median '
                             '%.1f ms, max %.1f ms\n'
                             % (len(lat), lat[len(lat) // 2] * 1000,
                                lat[-1] * 1000))
            self.assertLess(lat[-1], 1.0 * SLOW, lat[-10:])
            # The watch followed the renames: a folder's new name.
            side = 'a' if os.path.isdir(self.p('a')) else 'b'
            time.sleep(0.5)
            n = len(got)
            with open(self.p(side, '7', 'f'), 'w'):
                pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and t.is_alive() and \
                    (side + '/7/f', 'EVENT_TYPE_CREATE') not in \
                    self.events(got[n:]):
                time.sleep(0.05)
            if got and got[-1][0] & 2:
                # A client that does not keep up may be dropped, or a watch
                # whose inotify queue overflowed (as envd's), never the
                # loop held.
                e = got[-1][1]['error']
                self.assertTrue(e['code'] == 'resource_exhausted' or
                                'overflowed' in e['message'], e)
            else:
                self.assertIn((side + '/7/f', 'EVENT_TYPE_CREATE'),
                              self.events(got[n:]))
        finally:
            s.close()
        self.assertLess(self.healthz(), 1.0 * SLOW)


@ROOT_ONLY
class WatchAsUserTest(WatchCase):
    """R5-6: a watch acting as a user (--envd-confine-files 1) reports
    nothing from the folders that user cannot read, made before the watch,
    after it, or closed later; includeEntry's entries are looked up as that
    user.  (By default a watch acts as envd's: as root.)"""

    extra = ('--envd-confine-files', '1')

    def test_folders_the_user_cannot_read(self):
        os.chmod(self.agentd.dir, 0o755)
        os.chmod(self.root, 0o755)
        w = self.p('w')
        os.mkdir(w)
        os.mkdir(self.p('w', 'old'), 0o700)        # root's, before
        os.mkdir(self.p('w', 'mine'))
        self.as_nobody(w, self.p('w', 'mine'))
        for name, mode in (('r', 0o600), ('s', 0o644)):    # root's files
            open(self.p('w', 'mine', name), 'w').close()
            os.chmod(self.p('w', 'mine', name), mode)
        s, f = self.stream('WatchDir', {'path': w, 'recursive': True,
                                        'includeEntry': True},
                           dict(basic('nobody'),
                                **{'Connect-Timeout-Ms': '2500'}))
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            os.mkdir(self.p('w', 'secret'), 0o700)     # root's, after
            os.mkdir(self.p('w', 'pub'), 0o755)        # root's, readable
            time.sleep(0.3)
            for name in ('old/a', 'secret/b', 'pub/c', 'mine/d'):
                with open(self.p('w', name), 'w') as fh:
                    fh.write('x')
            try:                    # metadata of a file nobody cannot read
                for name in ('r', 's'):
                    os.setxattr(self.p('w', 'mine', name), 'user.e2b.k', b'v')
                xattrs = True
            except OSError:
                xattrs = False
            time.sleep(0.3)
            os.chmod(self.p('w', 'pub'), 0o700)        # closed later
            with open(self.p('w', 'pub', 'e'), 'w') as fh:
                fh.write('x')
            got = self.envelopes(f)
        finally:
            s.close()
        evs = self.events(got)
        entries = {m['filesystem']['name']: m['filesystem'].get('entry')
                   for _, m in got if 'filesystem' in m}
        for want in ('secret', 'pub', 'pub/c', 'mine/d'):
            self.assertIn((want, 'EVENT_TYPE_CREATE'), evs)
        self.assertEqual(entries['pub/c']['name'], 'c')
        self.assertEqual(entries['mine/d']['size'], '1')
        if xattrs:
            self.assertNotIn('metadata', entries['mine/r'])
            self.assertEqual(entries['mine/s']['metadata'], {'k': 'v'})
        for name, _ in evs:
            self.assertFalse(name.startswith(('old/', 'secret/', 'pub/e')),
                             evs)
        self.assertEqual(got[-1][1]['error']['code'], 'deadline_exceeded')


class WatchTreeTest(WatchCase):
    """A recursive watch follows its folders through renames: within the
    tree (relinked, the new names reported), out of it (nothing more from
    there) and into it (read, then followed).  Before, a folder renamed
    within the tree kept reporting under its old name."""

    def test_renames_in_out_and_within(self):
        os.makedirs(self.p('w', 'a', 'b', 'c'))
        os.makedirs(self.p('out', 'x', 'y', 'z'))
        s, f = self.stream('WatchDir', {'path': self.p('w'),
                                        'recursive': True},
                           {'Connect-Timeout-Ms': '3000'})
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            got, t = self.drain(f)

            def touch(*names):
                open(self.p(*names), 'w').close()

            def seen(name):
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    if (name, 'EVENT_TYPE_CREATE') in self.events(got):
                        return True
                    time.sleep(0.02)
                return False
            os.rename(self.p('w', 'a', 'b'), self.p('w', 'b2'))
            touch('w', 'b2', 'c', 'f1')
            self.assertTrue(seen('b2/c/f1'), self.events(got))
            os.rename(self.p('w', 'b2'), self.p('out', 'b3'))
            touch('out', 'b3', 'c', 'f2')
            os.rename(self.p('out', 'x'), self.p('w', 'a', 'x'))
            time.sleep(0.3)
            touch('w', 'a', 'x', 'y', 'z', 'f3')
            self.assertTrue(seen('a/x/y/z/f3'), self.events(got))
            os.rename(self.p('w', 'a'), self.p('w', 'a2'))
            touch('w', 'a2', 'x', 'y', 'f4')
            self.assertTrue(seen('a2/x/y/f4'), self.events(got))
            t.join(10)
        finally:
            s.close()
        for name, _ in self.events(got):
            self.assertNotIn('f2', name)
            self.assertFalse(name.startswith('a/b/'), name)
        self.assertEqual(self.metric('agentd_envd_watch_dirs'), 0)


class WatchMemoryTest(WatchCase):
    """R5-10: a watch's memory follows the folders it follows now: 20,000
    folders made and removed under a recursive watch of one folder leave it
    at one folder, in tables sized to it (before, its table, indexed by
    inotify descriptor, only grew).  agentd's RSS is no measure here: the
    stream's buffers grow to their size meanwhile."""

    def test_tables_shrink(self):
        s, f = self.stream('WatchDir', {'path': self.root, 'recursive': True})
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            got, t = self.drain(f)
            self.assertEqual(self.metric('agentd_envd_watch_dirs'), 1)
            small = self.metric('agentd_envd_watch_bytes')
            for batch in range(10):
                names = ['d%d' % i for i in range(2000)]
                for n in names:
                    os.mkdir(self.p(n))
                for n in names:
                    os.rmdir(self.p(n))
                # Paced: the watch keeps up (no queue overflow).
                deadline = time.monotonic() + 10 * SLOW
                while time.monotonic() < deadline and t.is_alive() and \
                        ('d1999', 'EVENT_TYPE_REMOVE') not in \
                        self.events(got[-8:]):
                    time.sleep(0.01)
                self.assertTrue(t.is_alive(), got[-3:])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and \
                    self.metric('agentd_envd_watch_dirs') > 1:
                time.sleep(0.05)
            self.assertEqual(self.metric('agentd_envd_watch_dirs'), 1)
            self.assertLessEqual(self.metric('agentd_envd_watch_bytes'),
                                 small)
        finally:
            s.close()


class WatchEndTest(WatchCase):
    """As envd's: when the watched folder is removed the watch reports
    REMOVE "." (RENAME "." when it is moved) and nothing more; a stream
    stays open until its deadline (or client), a watcher answers what it
    held, without error.  Before, agentd held the folder open, so inotify
    never told its removal."""

    def test_watched_folder_removed_or_moved(self):
        for rec in (False, True):
            d = self.p('w%d' % rec)
            os.makedirs(os.path.join(d, 'sub'))
            s, f = self.stream('WatchDir', {'path': d, 'recursive': rec},
                               {'Connect-Timeout-Ms': '1500'})
            try:
                self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
                os.rmdir(os.path.join(d, 'sub'))
                os.rmdir(d)
                time.sleep(0.2)
                os.mkdir(d)                 # another folder: not watched
                open(os.path.join(d, 'x'), 'w').close()
                got = self.envelopes(f)
            finally:
                s.close()
            self.assertEqual(self.events(got), [
                ('sub', 'EVENT_TYPE_REMOVE'), ('.', 'EVENT_TYPE_REMOVE')])
            self.assertEqual(got[-1][1]['error']['code'], 'deadline_exceeded')
        os.mkdir(self.p('m'))
        s, f = self.stream('WatchDir', {'path': self.p('m'),
                                        'recursive': True},
                           {'Connect-Timeout-Ms': '1500'})
        try:
            self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            os.rename(self.p('m'), self.p('m2'))
            open(self.p('m2', 'x'), 'w').close()
            got = self.envelopes(f)
        finally:
            s.close()
        self.assertEqual(self.events(got), [('.', 'EVENT_TYPE_RENAME')])
        self.assertEqual(got[-1][1]['error']['code'], 'deadline_exceeded')
        # A watcher: its events, then none, no error; it counts until
        # removed, its folders do not.
        os.mkdir(self.p('c'))
        st, r = self.rpc('CreateWatcher', {'path': self.p('c')})
        self.assertEqual(st, 200, r)
        wid = r['watcherId']
        os.rmdir(self.p('c'))
        time.sleep(0.3)
        st, r = self.rpc('GetWatcherEvents', {'watcherId': wid})
        self.assertEqual((st, r), (200, {'events': [
            {'name': '.', 'type': 'EVENT_TYPE_REMOVE'}]}))
        st, r = self.rpc('GetWatcherEvents', {'watcherId': wid})
        self.assertEqual((st, r), (200, {}))
        self.assertEqual(self.metric('agentd_envd_watches'), 1)
        self.assertEqual(self.metric('agentd_envd_watch_dirs'), 0)
        st, r = self.rpc('RemoveWatcher', {'watcherId': wid})
        self.assertEqual(st, 200, r)
        self.assertEqual(self.metric('agentd_envd_watches'), 0)


class WatchCountTest(WatchCase):
    """Item 12: --envd-watchers counts CreateWatcher watchers and WatchDir
    streams together, a watch being opened included: concurrent calls do
    not overshoot it (before, each call checked the count its watch was not
    in yet, and streams were not counted at all)."""

    extra = ('--envd-watchers', '2')

    def test_concurrent_and_streams(self):
        for i in range(300):
            os.makedirs(self.p('t', str(i), 'x'))
        res = []

        def call():
            res.append(self.rpc('CreateWatcher', {'path': self.p('t'),
                                                  'recursive': True}))
        ts = [threading.Thread(target=call) for _ in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ok = [r['watcherId'] for st, r in res if st == 200]
        self.assertEqual(len(ok), 2, res)
        for st, r in res:
            if st != 200:
                self.assertEqual(r['code'], 'resource_exhausted', r)
        self.assertEqual(self.metric('agentd_envd_watches'), 2)
        self.assertGreaterEqual(
            self.metric('agentd_envd_watches_refused_total'), 1)
        for wid in ok:
            self.assertEqual(self.rpc('RemoveWatcher',
                                      {'watcherId': wid})[0], 200)
        # Streams count too.
        socks = []
        try:
            for _ in range(2):
                s, f = self.stream('WatchDir', {'path': self.root})
                socks.append(s)
                self.assertEqual(self.envelopes(f, 1), [(0, {'start': {}})])
            self.assertEqual(self.metric('agentd_envd_watches'), 2)
            s, f = self.stream('WatchDir', {'path': self.root})
            socks.append(s)
            got = self.envelopes(f)
            self.assertEqual(got[-1][1]['error']['code'],
                             'resource_exhausted')
            self.assertIn('--envd-watchers', got[-1][1]['error']['message'])
            st, r = self.rpc('CreateWatcher', {'path': self.root})
            self.assertEqual((st, r['code']), (429, 'resource_exhausted'))
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and \
                self.metric('agentd_envd_watches') > 0:
            time.sleep(0.05)
        st, r = self.rpc('CreateWatcher', {'path': self.root})
        self.assertEqual(st, 200, r)


class StopTest(WatchCase):
    """R5-11: agentd stops cleanly (exit 0, no sanitizer report) with a
    WatchDir, a Start and a Connect stream open; each ends unavailable.
    Before, the watchers were freed before the connections closed, which
    then used them (ASan: heap-use-after-free; the dev build: SIGSEGV)."""

    def raw_stream(self, path, msg):
        body = json.dumps(msg).encode()
        env = struct.pack('>BI', 0, len(body)) + body
        s = socket.create_connection(('127.0.0.1', self.eport),
                                     timeout=TIMEOUT)
        s.sendall(('POST /%s HTTP/1.1\r\nHost: localhost\r\nContent-Type: '
                   'application/connect+json\r\nX-Access-Token: %s\r\n'
                   'Content-Length: %d\r\n\r\n'
                   % (path, self.agentd.token, len(env))).encode() + env)
        f = s.makefile('rb')
        self.assertIn(b' 200 ', f.readline())
        f.length = None
        while f.readline() not in (b'\r\n', b''):
            pass
        return s, f

    def test_stop_with_streams_open(self):
        s1, f1 = self.raw_stream('filesystem.Filesystem/WatchDir',
                                 {'path': self.root, 'recursive': True})
        self.assertEqual(self.envelopes(f1, 1), [(0, {'start': {}})])
        s2, f2 = self.raw_stream('process.Process/Start', {'process': {
            'cmd': '/bin/sh', 'args': ['-c', 'sleep 30']}})
        pid = self.envelopes(f2, 1)[0][1]['event']['start']['pid']
        s3, f3 = self.raw_stream('process.Process/Connect',
                                 {'process': {'pid': pid}})
        self.assertIn('start', self.envelopes(f3, 1)[0][1]['event'])
        try:
            self.stop_agentd()
            err = self.agentd.stderr()
            for bad in ('AddressSanitizer', 'LeakSanitizer', 'runtime error'):
                self.assertNotIn(bad, err)
            got = self.envelopes(f1)
            self.assertEqual(got[-1][0], 2, got)
            self.assertEqual(got[-1][1]['error']['code'], 'unavailable')
        finally:
            for s in (s1, s2, s3):
                s.close()


if __name__ == '__main__':
    unittest.main()
