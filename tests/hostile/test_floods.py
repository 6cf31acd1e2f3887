"""Floods: output as fast as processes can write it, the global ring
budget, and stdin to a process that never reads."""

import os
import threading
import time

from hostilelib import (HostileTestCase, SANITIZED, SLOW, STARVED, asan_env,
                        healthz_latency, percentile, rss_kib)


class OutputFloodTest(HostileTestCase):
    """Six `cat /dev/zero` sessions must not starve healthz or a quiet
    session (per-fd read budgets)."""

    FLOODS = 6

    def test_flood_does_not_starve(self):
        floods = [self.create(argv=['cat', '/dev/zero'], tty=(i % 2 == 1))
                  for i in range(self.FLOODS)]
        ticker = self.create(cmd='while :; do echo tick; sleep 0.05; done')
        # Wait until the floods really flow.
        time.sleep(1.0)
        before = self.metric('agentd_output_bytes_total')
        # healthz on new connections, while another client follows the ticker.
        got = []
        stop = threading.Event()

        def follow():
            c = self.agentd.tcp_client()
            cursor = ticker['cursor']
            while not stop.is_set():
                t0 = time.monotonic()
                r = self.get_raw(ticker['id'], cursor=cursor, wait_ms=2000,
                                 client=c)
                if r.status != 200:
                    got.append(('status', r.status))
                    return
                w = r.json
                if w['output']:
                    got.append(time.monotonic() - t0)
                cursor = w['cursor']
            c.close()

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        lat, statuses = healthz_latency(self.agentd.port, n=100)
        stop.set()
        t.join(10)
        after = self.metric('agentd_output_bytes_total')
        p95 = percentile(lat, 95)
        rate = (after - before) / 1e6
        print('healthz during %d floods: p50 %.1f ms, p95 %.1f ms, max %.1f ms; '
              '%.0f MB captured meanwhile; ticker windows %d'
              % (self.FLOODS, percentile(lat, 50) * 1000, p95 * 1000,
                 max(lat) * 1000, rate, len(got)))
        self.assertEqual(statuses, [200] * len(statuses))
        # Answered during the endless floods (how fast: bench/, scenario 6).
        self.assertLess(max(lat), STARVED, 'healthz max %.0f ms under flood'
                        % (max(lat) * 1000))
        self.assertGreater(after - before, 10 << 20, 'the floods did not flow')
        self.assertTrue(got and all(isinstance(g, float) for g in got), got)
        # The ticker's output keeps coming.
        self.assertLess(max(got), STARVED, 'ticker starved: %r' % got)
        for w in floods + [ticker]:
            self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % w['id'])
        self.assertAlive()

    def metric(self, name):
        r = self.req('GET', '/metrics')
        self.expect(r, 200)
        for line in r.body.decode().splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        self.fail('no %s in /metrics' % name)


class RingBudgetTest(HostileTestCase):
    """--max-total-ring-bytes: 429 ring_budget_exceeded beyond it."""

    agentd_args = ('--max-total-ring-bytes', '3MiB', '--ring-bytes', '1MiB')

    def test_budget(self):
        ws = [self.create(argv=['sleep', '60']) for _ in range(3)]
        r = self.create_raw(argv=['sleep', '60'])
        self.assertError(r, 429, 'ring_budget_exceeded')
        # A smaller ring still fits? No: the budget is full to the byte.
        r = self.create_raw(argv=['sleep', '60'], ring_bytes=4096)
        self.assertError(r, 429, 'ring_budget_exceeded')
        # Exited and retained sessions count too, until removed.
        self.req('POST', '/v1/sessions/%s/signal' % ws[0]['id'],
                 {'signal': 'SIGKILL'})
        self.wait_state(ws[0]['id'], 'exited')
        self.assertError(self.create_raw(argv=['true']), 429,
                         'ring_budget_exceeded')
        self.expect(self.req('DELETE', '/v1/sessions/%s' % ws[0]['id']), 200)
        w = self.create(argv=['true'])
        self.assertTrue(w['id'])
        for x in ws[1:] + [w]:
            self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % x['id'])
        self.assertAlive()

    def test_many_small_rings_fit(self):
        ws = [self.create(argv=['sleep', '60'], ring_bytes=65536)
              for _ in range(48)]
        r = self.create_raw(argv=['sleep', '60'], ring_bytes=65536)
        self.assertError(r, 429, 'ring_budget_exceeded')
        for x in ws:
            self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % x['id'])


class StdinNeverReadTest(HostileTestCase):
    """stdin to a process that never reads: 429, and agentd's memory stays
    bounded however long the client insists."""

    BUF = 256 * 1024
    autostart = False

    def setUp(self):
        super().setUp()
        self.start_agentd(('--stdin-buffer', str(self.BUF)), env=asan_env())

    def check(self, tty):
        w = self.create(argv=['sleep', '120'], tty=tty)
        base = rss_kib(self.pid())
        # No control bytes on a tty: ^C would end the process.
        block = (b'x' * 63 + b'\n') * 512 if tty else os.urandom(32768)
        accepted = rejected = 0
        for _ in range(400):            # 12.5 MiB offered
            r = self.stdin_raw(w['id'], data=block)
            if r.status == 429:
                self.assertError(r, 429, 'stdin_backpressure')
                rejected += 1
            else:
                self.expect(r, 200)
                accepted += len(block)
        grown = rss_kib(self.pid()) - base
        print('%s: %d KiB accepted, %d requests refused, RSS grew %d KiB'
              % ('tty' if tty else 'pipes', accepted // 1024, rejected, grown))
        self.assertGreater(rejected, 300)
        # The queue, plus what the kernel's pipe or tty buffer took.
        self.assertLessEqual(accepted, self.BUF + 1024 * 1024)
        self.assertLess(grown, (48 if SANITIZED else 16) * 1024,
                        'RSS grew %d KiB' % grown)
        self.req('DELETE', '/v1/sessions/%s?grace_ms=0' % w['id'])
        self.assertAlive()

    def test_pipes(self):
        self.check(False)

    def test_tty(self):
        self.check(True)
