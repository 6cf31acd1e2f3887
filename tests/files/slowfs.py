"""A file system that is as slow as a test wants: FUSE spoken over /dev/fuse.

SlowFS(folder, stall=True) mounts a file system that answers nothing, not
even the kernel's INIT: every lookup under it blocks until close().
SlowFS(folder, data=b'...') serves one file, folder/f, whose READs wait for
release() (as a stuck NFS or FUSE server would), everything else answered.
Needs root and /dev/fuse; available() says whether both are there.
"""

import ctypes
import errno
import os
import struct
import threading

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR = 1, 2, 3
FUSE_OPEN, FUSE_READ, FUSE_STATFS, FUSE_RELEASE = 14, 15, 17, 18
FUSE_FLUSH, FUSE_INIT, FUSE_INTERRUPT, FUSE_BATCH_FORGET = 25, 26, 36, 42
NO_REPLY = (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT)

IN_HEADER = struct.Struct('<IIQQIIIHH')
OUT_HEADER = struct.Struct('<IiQ')
ATTR = struct.Struct('<QQQQQQIIIIIIIIII')

_libc = ctypes.CDLL(None, use_errno=True)


def available():
    return os.geteuid() == 0 and os.path.exists('/dev/fuse')


class SlowFS:
    def __init__(self, folder, stall=False, data=b''):
        self.folder = folder
        self.stall = stall
        self.data = data
        self.gate = threading.Event()
        self.reading = threading.Event()    # a READ arrived
        self.fd = os.open('/dev/fuse', os.O_RDWR | os.O_CLOEXEC)
        opts = 'fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other' % self.fd
        if _libc.mount(b'agentd-slowfs', folder.encode(), b'fuse', 0,
                       opts.encode()) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(e, 'mount fuse: ' + os.strerror(e))
        self.thread = None
        if not stall:
            self.thread = threading.Thread(target=self._serve, daemon=True)
            self.thread.start()

    def release(self):
        """Let the READs through."""
        self.gate.set()

    def close(self):
        """Unmount; whatever still waits fails with ENOTCONN."""
        if self.fd is None:
            return
        self.gate.set()
        _libc.umount2(self.folder.encode(), 2)      # MNT_DETACH
        os.close(self.fd)
        self.fd = None
        if self.thread is not None:
            self.thread.join(5)

    def _attr(self, node):
        if node == 1:
            return ATTR.pack(1, 0, 0, 0, 0, 0, 0, 0, 0, 0o40755, 2, 0, 0, 0,
                             4096, 0)
        return ATTR.pack(2, len(self.data), (len(self.data) + 511) // 512,
                         0, 0, 0, 0, 0, 0, 0o100644, 1, 0, 0, 0, 4096, 0)

    def _reply(self, unique, payload=b'', error=0):
        out = OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique)
        try:
            os.write(self.fd, out + payload)
        except (OSError, TypeError):
            pass

    def _serve(self):
        fd = self.fd
        while True:
            try:
                req = os.read(fd, 1 << 20)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.ENOENT):
                    continue        # an interrupted request
                return              # ENODEV: unmounted
            if not req:
                return
            (_, op, unique, node, _, _, _, _, _) = IN_HEADER.unpack_from(req)
            body = req[IN_HEADER.size:]
            if op in NO_REPLY:
                continue
            if op == FUSE_INIT:
                major, minor, readahead, _ = struct.unpack_from('<IIII', body)
                self._reply(unique, struct.pack('<IIIIHHIIHHII', 7, 31,
                                                readahead, 0, 16, 12, 65536,
                                                1, 16, 0, 0, 0) + bytes(24))
            elif op == FUSE_LOOKUP:
                name = body.split(b'\0', 1)[0]
                if node != 1 or name != b'f':
                    self._reply(unique, error=errno.ENOENT)
                else:
                    self._reply(unique, struct.pack('<QQQQII', 2, 0, 1, 1, 0, 0)
                                + self._attr(2))
            elif op == FUSE_GETATTR:
                self._reply(unique, struct.pack('<QII', 1, 0, 0) +
                            self._attr(node))
            elif op == FUSE_OPEN:
                self._reply(unique, struct.pack('<QIi', 1, 0, 0))
            elif op == FUSE_READ:
                _, off, size = struct.unpack_from('<QQI', body)
                self.reading.set()
                self.gate.wait()
                self._reply(unique, self.data[off:off + size])
            elif op == FUSE_STATFS:
                self._reply(unique, struct.pack('<QQQQQIIII', 0, 0, 0, 0, 0,
                                                4096, 255, 4096, 0) + bytes(24))
            elif op in (FUSE_FLUSH, FUSE_RELEASE):
                self._reply(unique)
            else:
                self._reply(unique, error=errno.ENOSYS)
