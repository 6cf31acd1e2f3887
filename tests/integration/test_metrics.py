"""Metrics: Prometheus text format with the names API.md lists."""

import re
import unittest

from harness import AgentdTestCase

LINE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)(\s+\d+)?$')


def parse(text):
    """{(name, frozenset(labels)): value}"""
    out = {}
    for line in text.split('\n'):
        if not line or line.startswith('#'):
            continue
        m = LINE_RE.match(line)
        if not m:
            raise AssertionError('not a Prometheus sample line: %r' % line)
        labels = frozenset()
        if m.group(3):
            labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                          m.group(3)))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


class MetricsTest(AgentdTestCase):

    def metrics(self):
        r = self.req('GET', '/metrics')
        self.expect(r, 200)
        ct = r.header('Content-Type') or ''
        self.assertTrue(ct.startswith('text/plain'), 'Content-Type %r' % ct)
        return parse(r.body.decode('utf-8'))

    def value(self, m, name, **labels):
        """Sum of the samples of `name` whose labels include `labels`."""
        want = set(labels.items())
        found = [v for (n, l), v in m.items() if n == name and want <= set(l)]
        self.assertTrue(found, '%s%s missing from /metrics' % (name, labels or ''))
        return sum(found)

    def test_names_present(self):
        self.expect(self.req('GET', '/v1/sessions'), 200)
        m = self.metrics()
        for name in ('agentd_sessions_running', 'agentd_sessions_started_total',
                     'agentd_output_bytes_total', 'agentd_output_dropped_bytes_total'):
            self.value(m, name)
        codes = [dict(l).get('code') for (n, l) in m if n == 'agentd_http_requests_total']
        self.assertIn('200', codes)

    def test_counters_move(self):
        m0 = self.metrics()
        w = self.create(cmd='sleep 30')
        self.create(cmd='printf 12345', yield_ms=5000)
        self.get_raw('missing')
        m1 = self.metrics()
        self.assertEqual(self.value(m1, 'agentd_sessions_running'), 1)
        self.assertEqual(self.value(m1, 'agentd_sessions_started_total')
                         - self.value(m0, 'agentd_sessions_started_total'), 2)
        self.assertGreaterEqual(self.value(m1, 'agentd_output_bytes_total')
                                - self.value(m0, 'agentd_output_bytes_total'), 5)
        self.assertGreaterEqual(self.value(m1, 'agentd_http_requests_total', code='201'), 2)
        self.assertGreaterEqual(self.value(m1, 'agentd_http_requests_total', code='404'), 1)
        self.expect(self.delete(w['id']), 200)
        m2 = self.metrics()
        self.assertEqual(self.value(m2, 'agentd_sessions_running'), 0)

    def test_dropped_bytes(self):
        m0 = self.metrics()
        w = self.create(cmd='head -c 100000 /dev/zero', ring_bytes=4096, yield_ms=10000)
        self.wait_state(w['id'])
        self.read_all(w['id'], tty=False)
        m1 = self.metrics()
        self.assertGreaterEqual(self.value(m1, 'agentd_output_bytes_total')
                                - self.value(m0, 'agentd_output_bytes_total'), 100000)
        self.assertGreaterEqual(self.value(m1, 'agentd_output_dropped_bytes_total')
                                - self.value(m0, 'agentd_output_dropped_bytes_total'),
                                100000 - 4096)

    def test_evmem_kept_bounded(self):
        # libevent's kept buffers (musl builds; 0 with glibc) stay in their
        # 256 KiB budget however many requests came.
        for _ in range(50):
            self.expect(self.req('GET', '/healthz'), 200)
        kept = self.value(self.metrics(), 'agentd_evmem_kept_bytes')
        self.assertGreaterEqual(kept, 0)
        self.assertLessEqual(kept, 256 * 1024)

    def test_metrics_need_token(self):
        r = self.req('GET', '/metrics', client=self.agentd.tcp_client(auth=False))
        self.assertError(r, 401, 'unauthorized')


if __name__ == '__main__':
    unittest.main()
