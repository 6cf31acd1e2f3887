"""The files API as root against a sandbox user's symlinks, and user=.

A user owning a folder must not redirect root's reads, writes, mkdir or
fetches through symlinks planted there (agentd follows only root's and the
acting user's symlinks); with user=U every call runs with U's credentials.
Needs root (agentd as root, and a second user: nobody).
"""

import os
import pwd
import shutil
import tempfile
import unittest

from filesutil import FilesCase, q


def nobody():
    try:
        return pwd.getpwnam('nobody')
    except KeyError:
        return None


@unittest.skipUnless(os.geteuid() == 0 and nobody() is not None,
                     'needs root and the user nobody')
class UserTest(FilesCase):

    def setUp(self):
        super().setUp()
        self.nb = nobody()
        # A tree the other user can reach: /tmp/X (root, 0755) holding
        # u (nobody's), secret (root's, 0700) and pub (root's, 0755).
        self.top = tempfile.mkdtemp(prefix='agentd-user-')
        os.chmod(self.top, 0o755)
        self.addCleanup(shutil.rmtree, self.top, True)
        self.u = os.path.join(self.top, 'u')
        os.mkdir(self.u, 0o755)
        os.chown(self.u, self.nb.pw_uid, self.nb.pw_gid)
        self.secret = os.path.join(self.top, 'secret')
        os.mkdir(self.secret, 0o700)
        with open(os.path.join(self.secret, 'key'), 'w') as f:
            f.write('root only')
        self.pub = os.path.join(self.top, 'pub')
        os.mkdir(self.pub, 0o755)

    def plant(self, name, target):
        """A symlink in u owned by nobody, as nobody would plant it."""
        path = os.path.join(self.u, name)
        os.symlink(target, path)
        os.lchown(path, self.nb.pw_uid, self.nb.pw_gid)
        return path

    def test_get_through_planted_symlink(self):
        self.plant('dir', self.secret)
        r = self.get_file(os.path.join(self.u, 'dir', 'key'))
        self.assertError(r, 403, 'permission_denied', 'symlink')
        self.assertNotIn(b'root only', r.body)

    def test_get_planted_last_component(self):
        """Even the token file stays out of reach through a planted link."""
        link = self.plant('tok', self.agentd.token_file)
        r = self.get_file(link)
        self.assertError(r, 403, 'permission_denied', 'symlink')
        self.assertNotIn(self.agentd.token.encode(), r.body)

    def test_put_and_mkdir_through_planted_symlink(self):
        self.plant('dir', self.secret)
        r = self.put(os.path.join(self.u, 'dir', 'planted'), b'x')
        self.assertError(r, 403, 'permission_denied', 'symlink')
        r = self.put(os.path.join(self.u, 'dir', 'sub', 'f'), b'x',
                     mkdir='true')
        self.assertError(r, 403, 'permission_denied', 'symlink')
        self.assertEqual(sorted(os.listdir(self.secret)), ['key'])

    def test_fetch_through_planted_symlink(self):
        self.plant('dir', self.secret)
        r = self.fetch(url='http://127.0.0.1:1/x',
                       path=os.path.join(self.u, 'dir', 'f'))
        self.assertError(r, 403, 'permission_denied', 'symlink')

    def test_stat_through_planted_symlink(self):
        self.plant('dir', self.secret)
        r = self.expect(self.stat([os.path.join(self.u, 'dir', 'key'),
                                   os.path.join(self.u, 'dir')]), 200)
        a, b = r.json['results']
        self.assertIs(a['exists'], False)
        self.assertEqual(a['error'], 'EACCES')
        # The link itself is described, not followed.
        self.assertIs(b['exists'], True)
        self.assertEqual(b['type'], 'symlink')

    def test_put_replaces_planted_symlink(self):
        """A symlink at the target is replaced, never written through."""
        self.plant('f', os.path.join(self.pub, 'victim'))
        self.expect(self.put(os.path.join(self.u, 'f'), b'new'), 200)
        self.assertFalse(os.path.islink(os.path.join(self.u, 'f')))
        self.assertFalse(os.path.exists(os.path.join(self.pub, 'victim')))

    def test_root_symlinks_followed(self):
        with open(os.path.join(self.pub, 'a'), 'w') as f:
            f.write('public')
        os.symlink(self.pub, os.path.join(self.top, 'publink'))
        os.symlink('a', os.path.join(self.pub, 'alink'))
        r = self.expect(self.get_file(os.path.join(self.top, 'publink',
                                                   'alink')), 200)
        self.assertEqual(r.body, b'public')
        self.expect(self.put(os.path.join(self.top, 'publink', 'sub', 'b'),
                             b'b', mkdir='true'), 200)
        with open(os.path.join(self.pub, 'sub', 'b'), 'rb') as f:
            self.assertEqual(f.read(), b'b')
        # Through a relative root link with "..", as the kernel resolves it.
        os.symlink('../pub/sub', os.path.join(self.pub, 'rel'))
        r = self.expect(self.get_file(os.path.join(self.pub, 'rel', 'b')),
                        200)
        self.assertEqual(r.body, b'b')

    def test_user_credentials(self):
        nb = self.nb.pw_name
        r = self.get_file(os.path.join(self.secret, 'key'), user=nb)
        self.assertError(r, 403, 'permission_denied')
        r = self.put(os.path.join(self.pub, 'f'), b'x', user=nb)
        self.assertError(r, 403, 'permission_denied')
        self.assertFalse(os.path.exists(os.path.join(self.pub, 'f')))
        # In nobody's folder: nobody's file and folders.
        r = self.expect(self.put(os.path.join(self.u, 'd', 'f'), b'mine',
                                 user=nb, mkdir='true'), 200)
        st = os.stat(os.path.join(self.u, 'd', 'f'))
        self.assertEqual((st.st_uid, st.st_gid),
                         (self.nb.pw_uid, self.nb.pw_gid))
        self.assertEqual(os.stat(os.path.join(self.u, 'd')).st_uid,
                         self.nb.pw_uid)
        # nobody's own symlinks are followed for nobody, by uid too.
        self.plant('mine', 'd/f')
        r = self.expect(self.get_file(os.path.join(self.u, 'mine'),
                                      user=str(self.nb.pw_uid)), 200)
        self.assertEqual(r.body, b'mine')
        r = self.expect(self.req('POST', '/v1/files/stat', {
            'paths': [os.path.join(self.secret, 'key'), self.u],
            'user': nb}), 200)
        a, b = r.json['results']
        self.assertEqual(a['error'], 'EACCES')
        self.assertIs(b['exists'], True)
        r = self.fetch(url='http://127.0.0.1:1/x', user=nb,
                       path=os.path.join(self.pub, 'f'))
        self.assertError(r, 403, 'permission_denied')
        # agentd itself keeps its credentials.
        self.expect(self.put(os.path.join(self.pub, 'g'), b'root'), 200)
        self.assertEqual(os.stat(os.path.join(self.pub, 'g')).st_uid, 0)

    def test_hard_link_of_another_users_file(self):
        # A file of nobody's with a second hard link (one nobody could
        # make of any file it can name where fs.protected_hardlinks is 0):
        # a call acting as someone else refuses it, read or replaced.
        f = os.path.join(self.u, 'theirs')
        with open(f, 'w') as fh:
            fh.write('not yours')
        os.chown(f, self.nb.pw_uid, self.nb.pw_gid)
        link = os.path.join(self.pub, 'link')
        os.link(f, link)
        r = self.get_file(link)
        self.assertError(r, 403, 'permission_denied', 'hard links')
        self.assertNotIn(b'not yours', r.body)
        self.assertError(self.put(link, b'x'), 403, 'permission_denied',
                         'hard links')
        with open(f) as fh:
            self.assertEqual(fh.read(), 'not yours')
        # Its owner may; and with one link left, so may root.
        r = self.get_file(link, user=str(self.nb.pw_uid))
        self.expect(r, 200)
        self.assertEqual(r.body, b'not yours')
        os.unlink(f)
        self.expect(self.get_file(link), 200)

    def test_hard_link_into_another_users_folder(self):
        # Issue 32 R6: where fs.protected_hardlinks is 0, nobody can link
        # root's 0600 file into its own folder (made here by root: the
        # rule is about owners, not about who made the link).  A GET acting
        # as root reaches a file of root's, but through nobody's folder.
        key = os.path.join(self.secret, 'key')
        os.chmod(key, 0o600)
        link = os.path.join(self.u, 'stolen')
        os.link(key, link)
        r = self.get_file(link)
        self.assertError(r, 403, 'permission_denied', 'hard links')
        self.assertNotIn(b'root only', r.body)
        # The same through a folder others may write (a sticky /tmp).
        tmp = os.path.join(self.top, 'tmp')
        os.mkdir(tmp)
        os.chmod(tmp, 0o1777)
        os.link(key, os.path.join(tmp, 'stolen'))
        r = self.get_file(os.path.join(tmp, 'stolen'))
        self.assertError(r, 403, 'permission_denied', 'hard links')
        self.assertNotIn(b'root only', r.body)
        # Root's own folders are fine, so is the name in the 0700 folder.
        os.link(key, os.path.join(self.pub, 'key2'))
        r = self.get_file(os.path.join(self.pub, 'key2'))
        self.expect(r, 200)
        self.assertEqual(r.body, b'root only')
        r = self.expect(self.get_file(key), 200)
        self.assertEqual(r.body, b'root only')
        # Through root's symlink (/etc/localtime to a zoneinfo file of
        # several links): the folder of the name it leads to counts.
        os.symlink(os.path.join(self.pub, 'key2'),
                   os.path.join(self.top, 'ok'))
        r = self.expect(self.get_file(os.path.join(self.top, 'ok')), 200)
        self.assertEqual(r.body, b'root only')
        os.symlink(link, os.path.join(self.top, 'bad'))
        r = self.get_file(os.path.join(self.top, 'bad'))
        self.assertError(r, 403, 'permission_denied', 'hard links')
        # Once the only link left is root's own, the file reads again.
        os.unlink(os.path.join(self.pub, 'key2'))
        os.unlink(os.path.join(tmp, 'stolen'))
        os.unlink(key)
        self.expect(self.get_file(link), 200)

    def test_user_has_no_capabilities(self):
        # As a process of that user: agentd's memory map is not its to
        # read, and kernel addresses read as zeros (no CAP_SYSLOG).
        nb = str(self.nb.pw_uid)
        maps = '/proc/%d/maps' % self.agentd.proc.pid
        self.expect(self.get_file(maps), 200)
        self.assertError(self.get_file(maps, user=nb), 403,
                         'permission_denied')
        with open('/proc/kallsyms') as f:
            real = f.readline()
        r = self.get_file('/proc/kallsyms', user=nb)
        self.expect(r, 200)
        first = r.body.split(b'\n', 1)[0].split()
        self.assertEqual(first[0], b'0' * len(first[0]), first)
        if not real.startswith('0' * 16):
            r = self.get_file('/proc/kallsyms')
            self.assertEqual(r.body.split(b'\n', 1)[0].decode(),
                             real.rstrip('\n'))

    def test_user_invalid(self):
        r = self.get_file(self.p('x'), user='no-such-user-agentd')
        self.assertError(r, 400, 'invalid_request', 'no-such-user-agentd')
        r = self.req('GET', '/v1/files' + q(path=self.p('x')) + '&user=')
        self.assertError(r, 400, 'invalid_request', 'user')
        r = self.req('POST', '/v1/files/stat', {'paths': ['/'], 'user': 5})
        self.assertError(r, 400, 'invalid_request', 'user')


if __name__ == '__main__':
    unittest.main()
