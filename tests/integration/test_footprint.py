"""The release binary's footprint: the file and an idle agentd's resident
memory each stay under 1 MiB (docs/build.md, "Footprint").

Only for the static release binary (build-static): the dev build is linked
dynamically against glibc and is not what ships. An idle agentd is the one
the harness starts (TCP, the unix socket, a token), asked /healthz on both;
its VmRSS is mostly the binary's own pages, which build-aux/hot-text.ld
keeps together. The median of three starts counts.
"""

import os
import statistics
import struct
import unittest

from harness import AgentdTestCase, agentd_path, free_port

MIB = 1 << 20
PT_INTERP = 3


def is_static(path):
    """True for an ELF without a program interpreter (static or static-pie)."""
    with open(path, 'rb') as f:
        head = f.read(64)
        if head[:4] != b'\x7fELF' or head[4] != 2:
            return False
        phoff, = struct.unpack_from('<Q', head, 0x20)
        phentsize, phnum = struct.unpack_from('<HH', head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from('<I', table, i * phentsize)[0] != PT_INTERP
               for i in range(phnum))


def status(pid, key):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    return None


def mappings(pid):
    """Rss by mapping, for a failure's message."""
    out, name = [], None
    with open('/proc/%d/smaps' % pid) as f:
        for line in f:
            parts = line.split()
            if '-' in parts[0] and not parts[0].endswith(':'):
                name = parts[5] if len(parts) > 5 else '[anon]'
            elif parts[0] == 'Rss:':
                out.append('%s %s KiB' % (name, parts[1]))
    return ', '.join(out)


@unittest.skipUnless(is_static(agentd_path()), 'not the static release binary')
class FootprintCase(AgentdTestCase):
    autostart = False

    def test_the_binary_is_under_one_mib(self):
        size = os.stat(agentd_path()).st_size
        self.assertLess(size, MIB, '%d bytes' % size)

    def idle_rss(self, extra=()):
        """VmRSS in KiB of an agentd after /healthz on each listener, and
        the mappings behind it."""
        a = self.start_agentd(list(extra))
        for client in (a.tcp_client(), a.unix_client()):
            self.assertEqual(client.request('GET', '/healthz', auth=False).status, 200)
        rss, maps = status(a.proc.pid, 'VmRSS'), mappings(a.proc.pid)
        self.stop_agentd(a)
        return rss, maps

    def assertIdleUnderOneMiB(self, extra=()):
        runs = [self.idle_rss(extra) for _ in range(3)]
        median = statistics.median(r for r, _ in runs)
        worst = max(runs)
        self.assertLess(median, 1024, 'VmRSS %s KiB; the largest: %s'
                        % ([r for r, _ in runs], worst[1]))

    def test_an_idle_agentd_is_under_one_mib(self):
        self.assertIdleUnderOneMiB()

    def test_an_idle_agentd_with_envd_is_under_one_mib(self):
        self.assertIdleUnderOneMiB(['--envd-listen', '127.0.0.1:%d' % free_port()])


if __name__ == '__main__':
    unittest.main()
