"""The web terminal (web/, served at /term/) in a real browser: Debian's
chromium, headless, driven by puppeteer-core (web_test.mjs, one scenario a
test) against an agentd of the integration harness with a token and
--web-dir WEB_DIR (<builddir>/web, written by the meson target `web`).

Run: meson test -C build --suite web
 or: AGENTD=build/agentd/agentd WEB_DIR=build/web /usr/bin/python3 tests/run.py tests/web/test_web.py
Needs node, chromium (build-aux/deps.sh test) and tests/web/node_modules
(npm ci, by build-aux/deps.sh test); skipped when one is missing.
WEB_OUT: where the screenshot (web-terminal.png) and downloads go (default:
a temporary folder).
"""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from harness import AgentdTestCase, SLOW
from test_cast import parse_cast, output_of

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, 'web_test.mjs')
CHROMIUM = os.environ.get('CHROMIUM') or shutil.which('chromium') or '/usr/bin/chromium'
CSP = ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'")


def missing():
    """What the browser tests lack, or None."""
    if not shutil.which('node'):
        return 'node'
    if not os.path.exists(CHROMIUM):
        return 'chromium (build-aux/deps.sh test)'
    if not os.path.isdir(os.path.join(HERE, 'node_modules', 'puppeteer-core')):
        return 'tests/web/node_modules (build-aux/deps.sh test runs npm ci)'
    web = os.environ.get('WEB_DIR')
    if not web or not os.path.isfile(os.path.join(web, 'index.html')):
        return 'WEB_DIR (<builddir>/web with index.html)'
    return None


class WebCase(AgentdTestCase):
    out = None

    @classmethod
    def setUpClass(cls):
        why = missing()
        if why:
            raise unittest.SkipTest('needs ' + why)
        cls.out = os.environ.get('WEB_OUT') or tempfile.mkdtemp(prefix='agentd-web-')
        os.makedirs(cls.out, exist_ok=True)

    def setUp(self):
        self.agentd_args = ('--web-dir', os.path.abspath(os.environ['WEB_DIR']))
        super().setUp()

    def base(self):
        return 'http://127.0.0.1:%d' % self.agentd.port

    def scenario(self, name, **more):
        """Runs one scenario of web_test.mjs; its facts."""
        env = dict(os.environ, AGENTD_URL=self.base(), AGENTD_TOKEN=self.agentd.token or '',
                   WEB_OUT=self.out, CHROMIUM=CHROMIUM, **more)
        env.pop('AGENTD', None)
        p = subprocess.run(['node', SCRIPT, name], cwd=HERE, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120 * SLOW)
        lines = p.stdout.decode('utf-8', 'replace').strip().splitlines()
        try:
            facts = json.loads(lines[-1])
        except (IndexError, ValueError):
            self.fail('%s: no result (exit %d)\nstdout:\n%s\nstderr:\n%s'
                      % (name, p.returncode, p.stdout.decode(errors='replace'),
                         p.stderr.decode(errors='replace')))
        if p.returncode != 0 or not facts.get('ok'):
            self.fail('%s failed (exit %d):\n%s\nstderr:\n%s'
                      % (name, p.returncode, json.dumps(facts, indent=1, ensure_ascii=False),
                         p.stderr.decode(errors='replace')[-4000:]))
        return facts

    def test_attach_scrollback_typing_once(self):
        """The ring's output first, then typed UTF-8, a paste and Ctrl-C,
        each byte once (stdin_bytes); an exited session shows its code and
        stays readable."""
        f = self.scenario('attach')
        self.assertEqual(f['stdin_bytes'], f['stdin_expected'])
        self.assertIn('exit code 7', f['status'])

    def test_other_client_and_lost_answer(self):
        """Output caused by another client appears on the page (as text,
        never HTML: '<b id=inj>' makes no element); a stdin
        write whose answer is lost (reset after agentd took it) is retried
        at the same offset and reaches the session once."""
        f = self.scenario('other')
        self.assertEqual(f['stdin_bytes'], f['stdin_expected'])

    def test_two_viewers(self):
        """Two pages on one session show the same text."""
        self.scenario('viewers')

    def test_view_only_sends_nothing(self):
        """&view=1: no stdin, no resize, no POST; shown at the PTY's size."""
        f = self.scenario('viewonly')
        self.assertEqual(f['stdin_bytes'], 0)

    def test_size_reaches_stty(self):
        """The page's size is the PTY's (stty size), after a window resize
        too; of two driving pages the last to resize wins; a pipe session is
        never resized."""
        f = self.scenario('stty')
        self.assertNotEqual(f['first'], f['resized'])
        self.assertNotEqual(f['resized'], f['last'])

    def test_offline_every_line_once(self):
        """Offline 2 s while numbered lines print: "reconnecting", then each
        line exactly once."""
        f = self.scenario('offline')
        self.assertLess(f['lines_seen_offline'], 40)

    def test_live_upgrade(self):
        """A live upgrade while lines print: the page shows each line once."""
        path = os.path.join(self.agentd.dir, 'agentd-next')
        shutil.copyfile(self.agentd.binary, path)
        os.chmod(path, 0o755)
        f = self.scenario('upgrade', UPGRADE_PATH=path)
        self.assertEqual(f['upgrades'], 1)

    def test_evicted_gap_marked(self):
        """Output the ring evicted is a marked line above the oldest held."""
        f = self.scenario('gap')
        self.assertRegex(f['top'][0], r'^\[agentd: \d+ bytes of output evicted from the ring\]$')

    def test_token_flow(self):
        """The token from the fragment, gone from the address bar, sent as
        Bearer only, in no URL, localStorage or cookie; a wrong one shows
        "unauthorized" and no session (also a wrong one put into the
        address bar of an open session); the Token field; the live list (a
        command's '<img>' stays text) and New shell."""
        f = self.scenario('token')
        self.assertEqual(f['url_after'], self.base() + '/term/')
        self.assertEqual(f['storage']['local'], 0)
        self.assertEqual(f['storage']['cookie'], '')

    def test_no_token(self):
        """An agentd without a token (loopback): the page works without the
        Token field and sends no Authorization header."""
        self.start_agentd(self.agentd_args, token=False)
        f = self.scenario('notoken')
        self.assertEqual(f['sessionStorage'], 0)

    def test_csp_and_framing(self):
        """The headers of the page and its files, an inline script refused
        in the browser, and the page not rendered in another site's frame."""
        for path in ('/term/', '/term/app.js', '/term/xterm.js', '/term/style.css'):
            c = http.client.HTTPConnection('127.0.0.1', self.agentd.port, timeout=30)
            c.request('GET', path)
            r = c.getresponse()
            r.read()
            c.close()
            self.assertEqual(r.status, 200, path)
            csp = r.getheader('Content-Security-Policy') or ''
            for d in CSP:
                self.assertIn(d, csp, path)
            self.assertNotIn('unsafe-eval', csp)
            self.assertNotIn("script-src 'self' 'unsafe-inline'", csp)
            self.assertEqual(r.getheader('X-Frame-Options'), 'DENY', path)
        self.scenario('csp')

    def test_cast_download_and_replay(self):
        """Download recording: a cast asciinema's loader accepts, whose "o"
        data is the session's output; the replay keeps its times."""
        f = self.scenario('cast')
        with open(f['cast_file'], 'rb') as fp:
            body = fp.read()
        header, events = parse_cast(self, body)
        self.assertEqual(output_of(events), f['output'])
        self.assertIn(('r', '66x22'), [(c, d) for (_, c, d) in events])
        try:
            from asciinema.asciicast import open_from_url
        except ImportError:
            self.skipTest('asciinema (Debian package) is not installed')
        with open_from_url(f['cast_file']) as a:
            self.assertEqual(a.version, 2)
            data = ''.join(e[2] for e in a.stdout_events())
        self.assertEqual(data, f['output'])

    def test_screenshot(self):
        """A screenshot of the page (docs/web-terminal.png comes from it)."""
        f = self.scenario('screenshot')
        with open(f['screenshot'], 'rb') as fp:
            self.assertEqual(fp.read(8), b'\x89PNG\r\n\x1a\n')
        sys.stderr.write('screenshot: %s\n' % f['screenshot'])


if __name__ == '__main__':
    unittest.main()
