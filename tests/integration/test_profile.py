"""A quiet environment for LLM tools (issue 24, item 4): "profile":
"noninteractive" on create, --profile for the sandbox's default.  Written
from API.md."""

from harness import AgentdTestCase

QUIET = {'NO_COLOR': '1', 'PAGER': 'cat', 'GIT_PAGER': 'cat',
         'GH_PAGER': 'cat', 'LC_ALL': 'C.UTF-8'}
NAMES = ('TERM', 'NO_COLOR', 'PAGER', 'GIT_PAGER', 'GH_PAGER', 'LC_ALL')
# Prints the variables as JSON (null when unset), then whether stdin is
# /dev/null.
PROBE = ("for v in %s; do eval \"x=\\${$v-@unset@}\"; printf '%%s=%%s\\n' "
         "\"$v\" \"$x\"; done; if [ \"$(readlink /proc/self/fd/0)\" = "
         "/dev/null ]; then echo stdin=null; else echo stdin=open; fi"
         % ' '.join(NAMES))


class ProfileTest(AgentdTestCase):

    def probe(self, **fields):
        w, ck = self.run_cmd(PROBE, **fields)
        out = ck.data().decode().replace('\r', '')
        env = dict(line.split('=', 1) for line in out.splitlines() if line)
        return {k: (None if v == '@unset@' else v) for k, v in env.items()}

    def test_noninteractive_pipes(self):
        env = self.probe(profile='noninteractive')
        want = dict(QUIET, TERM='dumb', stdin='null')
        self.assertEqual(env, want)

    def test_request_env_wins_and_stdin_explicit(self):
        env = self.probe(profile='noninteractive', stdin=True,
                         env={'PAGER': 'less', 'TERM': 'vt100'})
        self.assertEqual(env['PAGER'], 'less')
        self.assertEqual(env['TERM'], 'vt100')
        self.assertEqual(env['NO_COLOR'], '1')
        self.assertEqual(env['stdin'], 'open')

    def test_noninteractive_tty_keeps_term(self):
        env = self.probe(profile='noninteractive', tty=True)
        self.assertEqual(env, dict(QUIET, TERM='xterm-256color',
                                   stdin='open'))

    def test_default_is_as_before(self):
        env = self.probe()
        self.assertEqual(env, dict({k: None for k in NAMES}, stdin='open'))
        env = self.probe(profile='default')
        self.assertEqual(env['NO_COLOR'], None)

    def test_bad_profile(self):
        self.assertError(self.create_raw(cmd='true', profile='quiet'), 400,
                         'invalid_request', 'profile')
        self.assertError(self.create_raw(cmd='true', profile=1), 400,
                         'invalid_request', 'profile')


class ProfileFlagTest(AgentdTestCase):

    agentd_args = ('--profile', 'noninteractive')

    def test_flag_sets_the_default(self):
        w, ck = self.run_cmd(PROBE)
        self.assertIn(b'NO_COLOR=1\n', ck.data())
        self.assertIn(b'TERM=dumb\n', ck.data())
        self.assertIn(b'stdin=null\n', ck.data())
        w, ck = self.run_cmd(PROBE, profile='default')
        self.assertIn(b'NO_COLOR=@unset@\n', ck.data())
        self.assertIn(b'stdin=open\n', ck.data())
