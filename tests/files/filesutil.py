"""Helpers shared by the files tests: requests, RSS, temporary servers."""

import http.client
import os
import time
import urllib.parse

from harness import AgentdTestCase, HTTP_TIMEOUT


def q(**kw):
    return '?' + urllib.parse.urlencode(kw)


def rss_kib(pid):
    """VmRSS of pid in KiB (0 when unknown)."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class FilesCase(AgentdTestCase):
    """An agentd per test and a private folder under its temporary dir."""

    def setUp(self):
        super().setUp()
        self.root = os.path.join(self.agentd.dir, 'files')
        os.mkdir(self.root)

    def p(self, *names):
        return os.path.join(self.root, *names)

    def put(self, path, data, client=None, **params):
        return self.req('PUT', '/v1/files' + q(path=path, **params), data,
                        headers={'Content-Type': 'application/octet-stream'},
                        client=client)

    def get_file(self, path, client=None, **params):
        return self.req('GET', '/v1/files' + q(path=path, **params), client=client)

    def stat(self, paths):
        return self.req('POST', '/v1/files/stat', {'paths': paths})

    def fetch(self, client=None, **body):
        return self.req('POST', '/v1/files/fetch', body, client=client)

    def leftovers(self, folder=None):
        """Temporary files of agentd's left in folder (default: the root)."""
        folder = folder or self.root
        return [n for n in os.listdir(folder) if 'agentd-tmp' in n]

    def stream_get(self, path, on_chunk, chunk=1 << 20, **params):
        """GET a file on a connection of its own, calling on_chunk(bytes)."""
        conn = http.client.HTTPConnection('127.0.0.1', self.agentd.port,
                                          timeout=HTTP_TIMEOUT)
        try:
            conn.request('GET', '/v1/files' + q(path=path, **params),
                         headers=self.agentd.auth_headers())
            r = conn.getresponse()
            total = 0
            while True:
                b = r.read(chunk)
                if not b:
                    break
                total += len(b)
                on_chunk(b)
            return r.status, dict(r.getheaders()), total
        finally:
            conn.close()

    def wait_for(self, pred, timeout=10.0, what='condition'):
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                self.fail('%s not true within %.0fs' % (what, timeout))
            time.sleep(0.02)
