"""Local HTTP and HTTPS servers for the fetch tests (127.0.0.1 only).

Paths:
  /ok                 200 with Content-Length
  /chunked            200, Transfer-Encoding: chunked, odd chunk sizes
  /close              200, HTTP/1.0 style: no length, body ends at close
  /empty              204
  /status/N           N with a short body
  /r/abs/K, /r/rel/K  K redirects (absolute / relative Location) to /ok
  /r/proto/K          K redirects with a scheme-relative Location
  /r/code/C           one redirect with status C to /ok
  /r/loop             redirects to itself
  /to-https           302 to the HTTPS server's /ok
  /slow?ms=M          waits M ms before answering
  /trickle            headers, then a byte a second
  /big?mib=N          N MiB of deterministic bytes (sha256 via big_sha256)
  /r/to?url=U         302 to U, sent as it is (control bytes too)
"""

import hashlib
import http.server
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse

BIG_BLOCK = hashlib.sha256(b'agentd').digest() * (65536 // 32)   # 64 KiB


def big_sha256(mib):
    h = hashlib.sha256()
    for _ in range(mib * 16):
        h.update(BIG_BLOCK)
    return h.hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    payload = b''
    peer = None             # the other server (HTTP <-> HTTPS), for redirects
    hits = None             # list of paths requested

    def log_message(self, *a):
        pass

    def base(self):
        host = self.headers.get('Host')
        scheme = 'https' if isinstance(self.connection, ssl.SSLSocket) else 'http'
        return '%s://%s' % (scheme, host)

    def reply(self, code, body=b'', headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, code, location):
        self.reply(code, b'moved\n', [('Location', location)])

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        qs = urllib.parse.parse_qs(u.query)
        parts = u.path.strip('/').split('/')
        if self.hits is not None:
            self.hits.append(self.path)
        if u.path == '/ok':
            self.reply(200, self.payload, [('Content-Type', 'application/octet-stream')])
        elif u.path == '/chunked':
            self.send_response(200)
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            data, i, sizes = self.payload, 0, [1, 7, 4096, 65536, 100000, 3]
            n = 0
            while i < len(data):
                c = data[i:i + sizes[n % len(sizes)]]
                n += 1
                self.wfile.write(b'%x;ext=1\r\n' % len(c) + c + b'\r\n')
                i += len(c)
            self.wfile.write(b'0\r\nX-Trailer: yes\r\n\r\n')
        elif u.path == '/close':
            self.close_connection = True
            self.wfile.write(b'HTTP/1.0 200 OK\r\nContent-Type: x/y\r\n\r\n')
            self.wfile.write(self.payload)
        elif u.path == '/empty':
            self.send_response(204)
            self.end_headers()
        elif parts[0] == 'status':
            self.reply(int(parts[1]), b'no\n')
        elif parts[0] == 'r' and parts[1] in ('abs', 'rel', 'proto'):
            k = int(parts[2])
            if k == 0:
                self.reply(200, self.payload)
            elif parts[1] == 'abs':
                self.redirect(302, '%s/r/abs/%d' % (self.base(), k - 1))
            elif parts[1] == 'rel':
                self.redirect(301, '%d' % (k - 1))
            else:
                self.redirect(303, '//%s/r/proto/%d' % (self.headers['Host'], k - 1))
        elif parts[0] == 'r' and parts[1] == 'code':
            self.redirect(int(parts[2]), '/ok')
        elif u.path == '/r/to':
            self.redirect(302, qs['url'][0])
        elif u.path == '/r/loop':
            self.redirect(302, '/r/loop')
        elif u.path == '/to-https':
            self.redirect(302, 'https://localhost:%d/ok' % self.peer.port)
        elif u.path == '/slow':
            time.sleep(int(qs.get('ms', ['3000'])[0]) / 1000.0)
            self.reply(200, self.payload)
        elif u.path == '/trickle':
            self.send_response(200)
            self.send_header('Content-Length', '1000')
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b'x')
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
        elif u.path == '/big':
            mib = int(qs.get('mib', ['1'])[0])
            self.send_response(200)
            self.send_header('Content-Length', str(mib << 20))
            self.end_headers()
            for _ in range(mib * 16):
                self.wfile.write(BIG_BLOCK)
        else:
            self.reply(404, b'not here\n')


class Server:
    """A threaded HTTP(S) server on 127.0.0.1 (or host), stopped by close()."""

    def __init__(self, payload, tls_context=None, host='127.0.0.1'):
        self.hits = []
        self.handler = type('H', (Handler,), {'payload': payload, 'hits': self.hits})
        self.httpd = http.server.ThreadingHTTPServer((host, 0), self.handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # resets: quiet
        if tls_context is not None:
            self.httpd.socket = tls_context.wrap_socket(self.httpd.socket,
                                                        server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def set_peer(self, other):
        self.handler.peer = other

    def url(self, path, host='127.0.0.1'):
        scheme = 'https' if isinstance(self.httpd.socket, ssl.SSLSocket) else 'http'
        return '%s://%s:%d%s' % (scheme, host, self.port, path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class TestPKI:
    """A CA and server certificates made with the openssl CLI, in a temp dir."""

    def __init__(self):
        if shutil.which('openssl') is None:
            raise RuntimeError('the openssl command is missing')
        self.dir = tempfile.mkdtemp(prefix='agentd-pki-')
        self.ca_key = self.path('ca.key')
        self.ca_crt = self.path('ca.crt')
        self.run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', self.ca_key,
                 '-out', self.ca_crt, '-days', '2', '-subj', '/CN=agentd test CA',
                 '-addext', 'basicConstraints=critical,CA:TRUE',
                 '-addext', 'keyUsage=critical,keyCertSign,cRLSign')

    def path(self, name):
        return os.path.join(self.dir, name)

    def run(self, *args):
        subprocess.run(('openssl',) + args, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=self.dir)

    def server_cert(self, name, san):
        """(cert, key) for SAN like 'DNS:localhost,IP:127.0.0.1', signed by the CA."""
        key, csr, crt = self.path(name + '.key'), self.path(name + '.csr'), self.path(name + '.crt')
        ext = self.path(name + '.ext')
        with open(ext, 'w') as f:
            f.write('subjectAltName=%s\nbasicConstraints=CA:FALSE\n'
                    'keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' % san)
        self.run('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                 '-nodes', '-keyout', key, '-out', csr, '-subj', '/CN=' + name)
        self.run('x509', '-req', '-in', csr, '-CA', self.ca_crt, '-CAkey', self.ca_key,
                 '-CAcreateserial', '-out', crt, '-days', '2', '-extfile', ext)
        return crt, key

    def context(self, crt, key):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        return ctx

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)
