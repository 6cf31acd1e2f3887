"""soak.py -- agentd under a bounded soak: sessions with known output, many
readers each, connections dropped and resumed at random; every byte must
arrive exactly once or inside a reported gap, and agentd's fds and RSS must
come back once the sessions are deleted.

Usage: AGENTD=build/agentd/agentd python3 tests/soak/soak.py [--seconds N]
       [--sessions N] [--readers N] [--seed N]
Environment: SOAK_SECONDS (default 60), AGENTD_IT_SLOW as for the harness.

Waves of sessions run until --seconds are up.  A wave mixes:
  out   stdout only: `seq` in paced blocks (a shell loop)
  err   the same on stderr
  tty   the same on a PTY (the line discipline turns \\n into \\r\\n)
  both  stdout and stderr, fixed-width numbers, blocks interleaved
  flood stdout as fast as `seq` goes, into a 4 KiB or 16 KiB ring: gaps
Each session has --readers readers, each on its own keep-alive connection,
following its own cursor with random wait_ms and max_bytes (and raw mode
now and then).  At random a reader drops its connection between requests,
or sends a long-poll and closes without reading the answer; then it
resumes from its last cursor.

What is checked, per reader: chunk ids follow the cursor (first id =
cursor + dropped + 1, consecutive); each chunk's bytes are exactly the
generator's bytes at the chunk's offset (per stream where there are two);
offsets never overlap and never skip but across a reported gap; at eof the
last byte is the generator's last.  Per wave: every session deleted, no
reader left on any (GET /debug/stat), agentd's open fds back to the
baseline and its RSS back near it.  Prints the bytes verified.
"""

import argparse
import base64
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), 'integration'))

from harness import Agentd, SLOW  # noqa: E402

BLOCK = 300          # numbers per block of a paced generator
SANITIZED = os.environ.get('AGENTD_SANITIZED') == '1'
# RSS may stay this far above the start once the sessions are gone (ASan
# keeps freed blocks in a quarantine, here made small, and its caches).
RSS_SLACK_KIB = (48 if SANITIZED else 8) * 1024


class Failure(Exception):
    pass


def seq_bytes(a, b, fmt='%d\n'):
    return ''.join(fmt % i for i in range(a, b + 1)).encode()


class Kind:
    """A session's command and its expected output, per stream."""

    def __init__(self, name, blocks, rnd):
        self.name = name
        self.tty = name == 'tty'
        self.ring_bytes = None
        self.expected = {}
        n = blocks * BLOCK
        loop = ('i=0; while [ $i -lt %d ]; do %%s; i=$((i+1)); sleep 0.02; done'
                % blocks)
        rng = '$((i*%d+1)) $((i*%d+%d))' % (BLOCK, BLOCK, BLOCK)
        if name == 'out':
            self.cmd = loop % ('seq ' + rng)
            self.expected['stdout'] = seq_bytes(1, n)
        elif name == 'err':
            self.cmd = loop % ('seq %s >&2' % rng)
            self.expected['stderr'] = seq_bytes(1, n)
        elif name == 'tty':
            self.cmd = loop % ('seq ' + rng)
            self.expected['pty'] = seq_bytes(1, n).replace(b'\n', b'\r\n')
        elif name == 'both':
            self.cmd = loop % ("seq -f o%%09g %s; seq -f e%%09g %s >&2"
                               % (rng, rng))
            self.expected['stdout'] = seq_bytes(1, n, 'o%09d\n')
            self.expected['stderr'] = seq_bytes(1, n, 'e%09d\n')
        elif name == 'flood':
            m = min(1000000, 20000 * blocks + 100000)
            self.cmd = 'seq 1 %d' % m
            self.expected['stdout'] = seq_bytes(1, m)
            self.ring_bytes = rnd.choice([4096, 16384])
        else:
            raise ValueError(name)
        self.total = sum(len(v) for v in self.expected.values())


class Reader(threading.Thread):
    """One client following one session's cursor to eof."""

    def __init__(self, soak, sid, kind, rnd):
        super().__init__(daemon=True)
        self.soak, self.sid, self.kind, self.rnd = soak, sid, kind, rnd
        self.cursor = 0
        self.end = None             # offset + len of the last chunk
        self.pos = {s: 0 for s in kind.expected}
        self.known = {s: True for s in kind.expected}   # pos is certain
        self.verified = 0
        self.gaps = 0
        self.gap_chunks = 0
        self.drops = 0
        self.abandons = 0
        self.requests = 0
        self.error = None
        self.conn = None
        self.seen_ids = set()
        self.last_id = 0

    def fail(self, msg):
        raise Failure('%s (%s) reader: %s' % (self.sid, self.kind.name, msg))

    def connection(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection('127.0.0.1', self.soak.a.port,
                                                   timeout=60 * SLOW)
        return self.conn

    def drop(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def request(self, path, headers=None):
        hdrs = dict(self.soak.auth)
        hdrs.update(headers or {})
        for attempt in range(3):
            c = self.connection()
            try:
                c.request('GET', path, headers=hdrs)
                r = c.getresponse()
                body = r.read()
                if r.will_close:
                    self.drop()
                return r.status, r, body
            except (http.client.HTTPException, OSError):
                self.drop()
                if attempt == 2:
                    raise
        raise AssertionError('unreachable')

    def abandon(self):
        """A long-poll sent and its connection closed before the answer."""
        s = socket.create_connection(('127.0.0.1', self.soak.a.port), timeout=10)
        s.sendall(('GET /v1/sessions/%s?cursor=%d&wait_ms=30000 HTTP/1.1\r\n'
                   'Host: localhost\r\nAuthorization: %s\r\n\r\n'
                   % (self.sid, self.cursor, self.soak.auth['Authorization'])
                   ).encode())
        if self.rnd.random() < 0.5:
            time.sleep(self.rnd.random() * 0.05)
        if self.rnd.random() < 0.3:     # reset rather than FIN
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b'\x01\x00\x00\x00\x00\x00\x00\x00')
        s.close()
        self.abandons += 1

    def check_chunk(self, cid, stream, off, data, gap, rest=False):
        """rest: the rest of the chunk the last window ended inside."""
        k = self.kind
        if stream not in k.expected:
            self.fail('chunk %d on stream %r' % (cid, stream))
        if not data:
            self.fail('empty chunk %d' % cid)
        if rest:
            if cid != self.last_id or off != self.end:
                self.fail('chunk %d at %d is not the rest of chunk %d (ended '
                          'at %s)' % (cid, off, self.last_id, self.end))
        elif cid in self.seen_ids or cid <= self.last_id:
            self.fail('chunk %d returned twice (last %d)' % (cid, self.last_id))
        self.seen_ids.add(cid)
        self.last_id = cid
        if self.end is not None:
            if gap == 0 and off != self.end:
                self.fail('chunk %d at offset %d, the previous ended at %d'
                          % (cid, off, self.end))
            if gap and off < self.end + gap:
                self.fail('chunk %d at %d after a gap of %d chunks from %d'
                          % (cid, off, gap, self.end))
        elif gap == 0 and self.cursor == 0 and off != 0:
            self.fail('first chunk at offset %d' % off)
        exp = k.expected[stream]
        if len(k.expected) == 1:
            if exp[off:off + len(data)] != data:
                self.fail('chunk %d: %r at offset %d, expected %r'
                          % (cid, data[:60], off, exp[off:off + 60]))
        else:
            # Two streams: after a gap neither's position is known; a chunk
            # holding two whole records (unique) fixes its stream's again.
            if gap:
                self.known = {s: False for s in k.expected}
            p = self.pos[stream]
            if self.known[stream]:
                if exp[p:p + len(data)] != data:
                    self.fail('chunk %d (%s): %r at stream position %d, '
                              'expected %r' % (cid, stream, data[:60], p,
                                               exp[p:p + 60]))
            else:
                q = exp.find(data, p)
                if q < 0:
                    self.fail('chunk %d (%s): %r not in the stream after %d'
                              % (cid, stream, data[:60], p))
                p = q
                self.known[stream] = len(data) >= 22
            self.pos[stream] = p + len(data)
        self.end = off + len(data)
        self.verified += len(data)

    def read_json(self, wait_ms, max_bytes):
        q = 'cursor=%d&wait_ms=%d' % (self.cursor, wait_ms)
        if max_bytes is not None:
            q += '&max_bytes=%d' % max_bytes
        st, r, body = self.request('/v1/sessions/%s?%s' % (self.sid, q))
        if st != 200:
            self.fail('GET answered %d: %r' % (st, body[:300]))
        w = json.loads(body)
        out = w['output']
        dropped = w['dropped_chunks']
        # A window that ended inside chunk k answered j * 2^32 + k (API.md):
        # the next one starts with the rest of chunk k.
        low, inside = self.cursor & 0xffffffff, self.cursor >> 32
        after = low - 1 if inside else self.cursor
        if out:
            if out[0]['id'] != after + dropped + 1:
                self.fail('first id %d after cursor %d, dropped %d'
                          % (out[0]['id'], self.cursor, dropped))
        elif dropped:
            self.fail('a gap without chunks')
        if dropped:
            self.gaps += 1
            self.gap_chunks += dropped
        prev = None
        total = 0
        for i, ch in enumerate(out):
            if prev is not None and ch['id'] != prev + 1:
                self.fail('ids not consecutive: %d after %d' % (ch['id'], prev))
            data = base64.b64decode(ch['data'])
            self.check_chunk(ch['id'], ch['stream'], ch['offset'], data,
                             dropped if i == 0 else 0,
                             i == 0 and inside and not dropped)
            prev = ch['id']
            total += len(data)
        if max_bytes is not None and len(out) > 1 and total > max_bytes:
            self.fail('window of %d bytes over max_bytes %d' % (total, max_bytes))
        if out and w['cursor'] & 0xffffffff != out[-1]['id']:
            self.fail('cursor %d is not the last id %d' % (w['cursor'], out[-1]['id']))
        self.cursor = w['cursor']
        if w['eof']:
            if w['state'] != 'exited' or w['more']:
                self.fail('eof while %s, more %s' % (w['state'], w['more']))
            return True, w
        return False, w

    def read_raw(self, max_bytes):
        """Raw mode (single-stream sessions): the window's bytes in a row."""
        q = 'cursor=%d' % self.cursor
        if max_bytes is not None:
            q += '&max_bytes=%d' % max_bytes
        st, r, body = self.request('/v1/sessions/%s?%s' % (self.sid, q),
                                   {'Accept': 'application/octet-stream'})
        if st != 200:
            self.fail('raw GET answered %d: %r' % (st, body[:300]))
        cursor = int(r.getheader('X-Agentd-Cursor'))
        dropped = int(r.getheader('X-Agentd-Dropped-Chunks'))
        off = int(r.getheader('X-Agentd-Offset'))
        if body:
            stream = list(self.kind.expected)[0]
            # One pseudo-chunk: ids cursor+dropped+1 .. X-Agentd-Cursor,
            # either end possibly inside a chunk (j * 2^32 + id).
            if dropped:
                self.gaps += 1
                self.gap_chunks += dropped
            low, inside = self.cursor & 0xffffffff, self.cursor >> 32
            first = (low - 1 if inside else self.cursor) + dropped + 1
            last = cursor & 0xffffffff
            if last - first > 1 << 20:
                self.fail('raw: ids %d .. %d' % (first, last))
            rest = bool(inside and not dropped and first == low)
            for cid in range(first + (1 if rest else 0), last):
                self.seen_ids.add(cid)
            self.check_chunk(last, stream, off, body, dropped,
                             rest and last == low)
        elif cursor != self.cursor or dropped:
            self.fail('raw: cursor moved without bytes')
        self.cursor = cursor
        return r.getheader('X-Agentd-Eof') == 'true'

    def run(self):
        rnd = self.rnd
        single = len(self.kind.expected) == 1
        try:
            deadline = time.monotonic() + self.soak.read_timeout
            while time.monotonic() < deadline:
                self.requests += 1
                x = rnd.random()
                if x < 0.05:
                    self.abandon()
                    continue
                if x < 0.15:
                    self.drop()
                    self.drops += 1
                max_bytes = rnd.choice([None, None, 1, 7, 100, 1000, 4096,
                                        65536, rnd.randrange(1, 200000)])
                if single and rnd.random() < 0.1:
                    if self.read_raw(max_bytes):
                        break
                    continue
                wait_ms = rnd.choice([0, 0, 50, 250, 1000, 5000])
                eof, w = self.read_json(wait_ms, max_bytes)
                if eof:
                    if self.end != self.kind.total:
                        self.fail('eof with the last byte at %s, the output '
                                  'has %d' % (self.end, self.kind.total))
                    if w['bytes_out'] != self.kind.total:
                        self.fail('bytes_out %d, the output has %d'
                                  % (w['bytes_out'], self.kind.total))
                    if w['exit_code'] != 0:
                        self.fail('exit code %r' % w['exit_code'])
                    break
            else:
                self.fail('no eof within %.0fs (cursor %d, end %s)'
                          % (self.soak.read_timeout, self.cursor, self.end))
        except Failure as e:
            self.error = str(e)
        except Exception as e:          # noqa: BLE001 -- reported as a failure
            self.error = '%s (%s) reader: %r' % (self.sid, self.kind.name, e)
        finally:
            self.drop()


class Soak:
    def __init__(self, args):
        self.args = args
        self.rnd = random.Random(args.seed)
        self.read_timeout = 300 * SLOW
        self.verified = 0
        self.sessions = 0
        self.waves = 0
        self.stats = {'gaps': 0, 'gap_chunks': 0, 'drops': 0, 'abandons': 0,
                      'requests': 0}

    def proc_fds(self):
        return len(os.listdir('/proc/%d/fd' % self.a.proc.pid))

    def proc_rss(self):
        with open('/proc/%d/status' % self.a.proc.pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
        return 0

    def api(self, method, path, body=None):
        r = self.client.request(method, path, json_body=body)
        return r

    def debug_stat(self):
        c = self.a.unix_client()
        r = c.request('GET', '/debug/stat')
        c.close()
        return r.json

    def settle(self, what, cond, timeout=30):
        deadline = time.monotonic() + timeout * SLOW
        while not cond():
            if time.monotonic() > deadline:
                raise Failure('%s not back within %ds' % (what, timeout))
            time.sleep(0.1)

    def wave(self, blocks):
        kinds = []
        names = ['out', 'err', 'tty', 'both', 'flood']
        for i in range(self.args.sessions):
            kinds.append(Kind(names[i % len(names)], blocks, self.rnd))
        sids = []
        for k in kinds:
            body = {'cmd': k.cmd, 'tty': k.tty}
            if k.ring_bytes:
                body['ring_bytes'] = k.ring_bytes
            r = self.api('POST', '/v1/sessions', body)
            if r.status != 201:
                raise Failure('create %s: %d %r' % (k.name, r.status, r.body[:300]))
            sids.append(r.json['id'])
        readers = []
        for sid, k in zip(sids, kinds):
            for j in range(self.args.readers):
                rd = Reader(self, sid, k, random.Random(self.rnd.random()))
                readers.append(rd)
                rd.start()
        for rd in readers:
            rd.join(self.read_timeout + 60)
            if rd.is_alive():
                raise Failure('%s reader hung' % rd.sid)
            if rd.error:
                raise Failure(rd.error)
            self.verified += rd.verified
            for key in self.stats:
                self.stats[key] += getattr(rd, key)
        for sid in sids:
            r = self.api('DELETE', '/v1/sessions/%s' % sid)
            if r.status != 200:
                raise Failure('DELETE %s: %d %r' % (sid, r.status, r.body[:200]))
        self.sessions += len(sids)
        self.waves += 1

    def run(self):
        env = {}
        if SANITIZED:
            env['ASAN_OPTIONS'] = (os.environ.get('ASAN_OPTIONS', '') +
                                   ':quarantine_size_mb=4').lstrip(':')
        a = self.a = Agentd(('--exited-ttl', '1h'), env=env)
        a.start()
        try:
            self.client = a.tcp_client()
            self.auth = a.auth_headers()
            # The baseline: after one request of every kind (lazy allocations).
            self.api('GET', '/v1/sessions')
            self.debug_stat()
            self.client.close()
            time.sleep(0.3)
            base_fds = self.proc_fds()
            base_rss = self.proc_rss()
            t0 = time.monotonic()
            seconds = self.args.seconds
            # Blocks per paced generator: about four waves fit in the run (at
            # least one, however short; the readers set the pace, so the size
            # follows the last wave's time); a wave that would overrun is not
            # begun.
            blocks = max(10, int(seconds / 2))
            peak_rss = base_rss
            while True:
                w0 = time.monotonic()
                self.wave(blocks)
                took_wave = max(1.0, time.monotonic() - w0)
                blocks = max(10, min(4 * blocks, int(blocks * seconds / 4 /
                                                     took_wave)))
                self.client.close()
                peak_rss = max(peak_rss, self.proc_rss())
                # No reader, no session, no connection left; fds as before.
                self.settle('sessions', lambda: not self.debug_stat()['sessions'])
                self.settle('connections', lambda: self.debug_stat()[
                    'connections_open'] <= 1)
                self.settle('fds (%d at the start)' % base_fds,
                            lambda: self.proc_fds() <= base_fds)
                if os.environ.get('SOAK_VERBOSE'):
                    print('soak: wave %d: %d blocks, %.1fs, RSS %d KiB'
                          % (self.waves, blocks, took_wave, self.proc_rss()))
                if time.monotonic() - t0 + seconds / 4 >= seconds:
                    break
            took = time.monotonic() - t0
            rss = self.proc_rss()
            ok_rss = rss <= base_rss + RSS_SLACK_KIB
            print('soak: %d waves, %d sessions, %d readers each, %.0fs; '
                  '%d bytes verified (%.1f MB); %d requests, %d gaps '
                  '(%d chunks), %d connections dropped, %d long-polls '
                  'abandoned; fds %d -> %d; RSS %d KiB at the start, '
                  '%d KiB at the peak, %d KiB at the end'
                  % (self.waves, self.sessions, self.args.readers, took,
                     self.verified, self.verified / 1e6, self.stats['requests'],
                     self.stats['gaps'], self.stats['gap_chunks'],
                     self.stats['drops'], self.stats['abandons'], base_fds,
                     self.proc_fds(), base_rss, peak_rss, rss))
            if not ok_rss:
                raise Failure('RSS %d KiB after the sessions went, %d KiB at '
                              'the start' % (rss, base_rss))
            if self.stats['gaps'] == 0:
                raise Failure('no gap at all: the small rings did not overflow')
            if not a.alive():
                raise Failure('agentd died')
            rc, _ = a.stop()
            if rc != 0:
                raise Failure('agentd exited with %s' % rc)
        except Failure:
            sys.stderr.write('--- agentd stderr ---\n%s\n' % a.stderr()[-4000:])
            raise
        finally:
            a.kill()
            if os.environ.get('AGENTD_IT_KEEP') != '1':
                a.cleanup_dir()


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--seconds', type=float,
                   default=float(os.environ.get('SOAK_SECONDS', '60')))
    p.add_argument('--sessions', type=int, default=25)
    p.add_argument('--readers', type=int, default=3)
    p.add_argument('--seed', type=int, default=int(os.environ.get('SOAK_SEED', '1')))
    args = p.parse_args()
    if not os.environ.get('AGENTD'):
        sys.stderr.write('soak.py: AGENTD (path to the agentd binary) is not set\n')
        return 2
    try:
        Soak(args).run()
    except Failure as e:
        print('soak: FAILED: %s' % e)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
