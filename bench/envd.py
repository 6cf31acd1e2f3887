#!/usr/bin/env python3
"""bench/envd.py [--quick] [--outdir DIR]: scenario 12 of `make bench`.

The E2B SDK's commands.run('true') through --envd-listen (bench/envd.mjs,
node with tests/node's pinned e2b) next to agentd's own create of the same
command (/bin/bash -l -c true) with yield_ms, p50 of each, alternating in
batches; goal: at most 1.3x.  And agentd's idle VmRSS with the envd
listener on (after three GET /health and three GET /healthz; goal < 1 MiB).
Writes DIR/envd.md; exits 77 when node, e2b or the binary is missing.
Environment: STATIC_BIN (default build-static/agentd/agentd).
"""

import http.client
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NODE_MODULES = os.path.join(ROOT, 'tests', 'node', 'node_modules')


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(port, path, token):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    c.request('GET', path, headers={'X-Access-Token': token})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return -1


def main(argv):
    quick = '--quick' in argv
    outdir = argv[argv.index('--outdir') + 1] if '--outdir' in argv else \
        os.path.join(HERE, 'results')
    binary = os.path.abspath(os.environ.get(
        'STATIC_BIN', os.path.join(ROOT, 'build-static/agentd/agentd')))
    node = shutil.which('node')
    if node is None or not os.path.isdir(os.path.join(NODE_MODULES, 'e2b')) \
            or not os.access(binary, os.X_OK):
        sys.stderr.write('envd.py: no node, tests/node e2b or %s\n' % binary)
        return 77
    token = secrets.token_hex(16)
    tmp = tempfile.mkdtemp(prefix='agentd-envd-bench-')
    api, envd = free_port(), free_port()
    env = dict(os.environ, AGENTD_TOKEN=token)
    p = subprocess.Popen([binary, '--listen', '127.0.0.1:%d' % api,
                          '--envd-listen', '127.0.0.1:%d' % envd,
                          '--socket', '', '--dual-stack', '0',
                          '--log-level', 'warn'], env=env, cwd=tmp,
                         stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if get(envd, '/health', token) == 204:
                    break
            except OSError:
                time.sleep(0.05)
        for _ in range(3):
            get(envd, '/health', token)
            get(api, '/healthz', token)
        rss = rss_kib(p.pid)
        shutil.copy(os.path.join(HERE, 'envd.mjs'), tmp)
        os.symlink(NODE_MODULES, os.path.join(tmp, 'node_modules'))
        n = 10 if quick else 200
        r = subprocess.run([node, os.path.join(tmp, 'envd.mjs'),
                            'http://127.0.0.1:%d' % envd,
                            'http://127.0.0.1:%d' % api, token, str(n)],
                           cwd=tmp, stdout=subprocess.PIPE, timeout=600)
        if r.returncode != 0:
            sys.stderr.write('envd.py: envd.mjs failed\n')
            return 1
        s = json.loads(r.stdout.decode().strip().splitlines()[-1])
    finally:
        p.terminate()
        p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    sdk, create = statistics.median(s['sdk']), statistics.median(s['create'])
    ratio = sdk / create
    md = ['| 12 | envd | ours | baseline | ratio | goal |',
          '|---|---|---|---|---|---|',
          '| 12 | SDK `commands.run(\'true\')` p50 via --envd-listen, vs '
          '`POST /v1/sessions` of the same `/bin/bash -l -c true` (n=%d) '
          '| %.2f ms | %.2f ms | %.2fx | <= 1.3x %s |'
          % (len(s['sdk']), sdk, create, ratio,
             'ok' if ratio <= 1.3 else 'MISSED'),
          '| 12 | idle VmRSS with --envd-listen on | %d KiB | 1024 KiB | '
          '%.2fx | < 1 MiB %s |' % (rss, rss / 1024.0,
                                    'ok' if rss < 1024 else 'MISSED')]
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, 'envd.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')
    print('\n'.join(md))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
