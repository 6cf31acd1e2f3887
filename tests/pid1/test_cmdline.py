"""The kernel command line, as PID 1: agentd.<flag>=, agentd.token=, ip=.

A namespace stands in for a VM: a file with the test's command line is
bind-mounted over /proc/cmdline before agentd is exec'd (it stays PID 1), in
new network and UTS namespaces, where a veth pair named like a VM's NIC
appears a moment after agentd starts (as a NIC does once its module loads).
/run is a private tmpfs there.
"""

import json
import os
import shutil
import signal
import subprocess
import time
import unittest

from pid1lib import (LONG_GRACE_MS, QUICK, Pid1TestCase, agentd_path,
                     wait_for)

IP = '10.0.2.15::10.0.2.2:255.255.255.0:sbx-host:eth0:off'


def veth_works():
    if shutil.which('ip') is None:
        return False
    r = subprocess.run(['unshare', '--net', 'ip', 'link', 'add', 'eth0',
                        'type', 'veth', 'peer', 'name', 'peer0'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


HTTP_PROBE = r'''
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
h = {"Authorization": "Bearer " + sys.argv[2]} if len(sys.argv) > 2 else {}
c.request("GET", "/v1/sessions", headers=h)
print(c.getresponse().status)
'''


ENVD_PROBE = r'''
import http.client
c = http.client.HTTPConnection("127.0.0.1", 49983, timeout=10)
c.request("GET", "/health")
r = c.getresponse(); r.read()
c.request("POST", "/process.Process/List", "{}",
          {"Content-Type": "application/json"})
print(r.status, c.getresponse().status)
'''


class CmdlineTest(Pid1TestCase):

    def start_vm(self, cmdline, nic=True, env=None, args=(), grace_ms=2000,
                 wrap_more=(), ready=True):
        wrap = ['mount -t tmpfs -o mode=0755 tmpfs /run',
                'mount --bind "$CMDLINE_FILE" /proc/cmdline'] + list(wrap_more)
        if nic:
            wrap.append('{ sleep 0.3; ip link add eth0 type veth peer name '
                        'peer0; } >/dev/null 2>&1 &')
        base = {k: v for k, v in os.environ.items()
                if not k.startswith('AGENTD_')}
        # A namespace is not the initial one: ask for the command line.
        base['AGENTD_READ_KERNEL_CMDLINE'] = '1'
        base.update(env or {})
        from pid1lib import Agentd
        a = Agentd(args=args, env=base, grace_ms=grace_ms,
                   wrap='\n'.join(wrap), unshare_extra=['--net', '--uts'])
        self.agents.append(a)
        path = os.path.join(a.dir, 'cmdline')
        with open(path, 'w') as f:
            f.write(cmdline + '\n')
        a.env['CMDLINE_FILE'] = path
        if not ready:
            a.wait_ready = lambda: None     # the test looks for itself
        return a.start()

    def test_ip_token_and_flags_from_the_kernel_command_line(self):
        if not veth_works():
            raise unittest.SkipTest('no veth devices here')
        token = 'tok%dsecret' % os.getpid()
        a = self.start_vm('console=ttyS0 agentd.token=%s ip=%s '
                          'agentd.log-level=debug agentd.max-sessions=5 '
                          'agentd.exited-ttl=1 quiet' % (token, IP),
                          env={'AGENTD_MAX_SESSIONS': '3'})
        self.assertEqual(a.health['pid'], 1)
        code, out = a.run('cat /proc/cmdline; hostname; '
                          'ip -4 -o addr show dev eth0; ip -4 route show')
        self.assertEqual(code, 0, out)
        lines = out.decode().split('\n')
        # The token is gone from /proc/cmdline; the rest is there.
        self.assertEqual(lines[0], 'console=ttyS0 ip=%s agentd.log-level=debug '
                         'agentd.max-sessions=5 agentd.exited-ttl=1 quiet' % IP)
        self.assertNotIn(token.encode(), out)
        self.assertEqual(lines[1], 'sbx-host')
        self.assertIn('inet 10.0.2.15/24', lines[2])
        self.assertIn('default via 10.0.2.2 dev eth0', out.decode())
        # Nor in agentd's environment, its copy is read-only.
        code, out = a.run('tr "\\0" "\\n" < /proc/1/environ; '
                          'cat /run/agentd.cmdline; stat -c %a '
                          '/run/agentd.cmdline; echo x >> /proc/cmdline')
        self.assertNotIn(token.encode(), out)
        self.assertIn(b'\n444\n', out)
        self.assertNotEqual(code, 0, 'the copy is writable')
        # The token guards TCP (inside the namespace's network).
        code, out = a.run('/usr/bin/python3 -c \'%s\' %d' %
                          (HTTP_PROBE, a.port))
        self.assertEqual(out.strip(), b'401')
        code, out = a.run('/usr/bin/python3 -c \'%s\' %d %s' %
                          (HTTP_PROBE, a.port, token))
        self.assertEqual(out.strip(), b'200')
        # agentd.log-level=debug applied (nothing above it set one)...
        self.assertIn(' debug ', a.stderr())
        # ...and the environment beat agentd.max-sessions=5.
        for i in range(3):
            a.create('sleep 100')
        st, body = a.request('POST', '/v1/sessions', {'cmd': 'true'})
        self.assertEqual(st, 429, body)
        self.assertIn('netcfg_apply: eth0: 10.0.2.15', a.stderr())
        # Leaves a clean ending.
        rc, _ = a.stop(expect_within=a.grace_ms / 1000.0 + QUICK)
        self.assertEqual(rc, 0)

    def test_token_hidden_in_devicetree_bootargs(self):
        """arm64 and riscv repeat the command line in the devicetree."""
        dt = '/sys/firmware/devicetree/base/chosen'
        token = 'dt%dsecret' % os.getpid()
        a = self.start_vm('console=ttyS0 agentd.token=%s quiet' % token,
                          nic=False, wrap_more=[
                              'mount -t tmpfs -o mode=0755 tmpfs /sys/firmware',
                              'mkdir -p ' + dt,
                              '{ tr -d "\\n" < "$CMDLINE_FILE"; printf "\\0"; } '
                              '> %s/bootargs' % dt])
        code, out = a.run('tr "\\0" "\\n" < %s/bootargs' % dt)
        self.assertEqual(code, 0, out)
        self.assertEqual(out, b'console=ttyS0 quiet\n')
        self.assertNotIn(token.encode(), out)

    def test_flags_beat_the_command_line_hostname_too(self):
        a = self.start_vm('ip=::::ip-host::off agentd.shutdown-grace=60000 '
                          'agentd.hostname=cmdline-host', nic=False,
                          args=['--hostname', 'flag-host'], grace_ms=1000)
        self.assertEqual(a.run('hostname')[1], b'flag-host\n')
        j = a.create("trap '' TERM; echo r; while :; do sleep 0.05; done")
        a.read_until(j['id'], b'r')
        rc, took = a.stop()
        self.assertEqual(rc, 0)
        self.assertLess(took, 10, '--shutdown-grace 1000 lost to the '
                        'command line')

    def test_envd_listen_from_the_command_line(self):
        a = self.start_vm('agentd.envd-listen=127.0.0.1:49983 quiet',
                          nic=False)
        code, out = a.run('/usr/bin/python3 -c \'%s\'' % ENVD_PROBE)
        self.assertEqual(out.strip(), b'204 200', a.stderr())

    def test_hostname_from_ip(self):
        a = self.start_vm('ip=::::ip-host::off', nic=False)
        self.assertEqual(a.run('hostname')[1], b'ip-host\n')

    def test_unsupported_and_broken_ip_leave_the_api_up(self):
        for value, needle in (('dhcp', "autoconfiguration 'dhcp' is not "
                               "supported"),
                              ('10.0.2.15::10.0.2.2:255.0.255.0::eth0:off',
                               "netmask '255.0.255.0' is not a netmask"),
                              ('10.0.2.300::::::off', "client '10.0.2.300'")):
            a = self.start_vm('ip=%s' % value, nic=False)
            self.assertIn(needle, a.stderr())
            self.assertEqual(a.run('echo ok')[1], b'ok\n')
            a.cleanup()

    def test_missing_nic_is_waited_for_then_given_up(self):
        t0 = time.monotonic()
        a = self.start_vm('ip=10.0.2.15::10.0.2.2:255.255.255.0::nosuch0:off',
                          nic=False)
        took = time.monotonic() - t0
        self.assertIn('no interface nosuch0', a.stderr())
        self.assertGreaterEqual(took, 1.9)
        self.assertEqual(a.run('echo ok')[1], b'ok\n')

    def test_sigterm_during_the_start_is_not_lost(self):
        # The start waits 2 s for a NIC that never comes; a SIGTERM then
        # (docker stop, say) must end agentd, not be dropped by a PID 1
        # whose disposition is still the default.
        a = self.start_vm('ip=10.0.2.15::10.0.2.2:255.255.255.0::nosuch0:off',
                          nic=False, ready=False, grace_ms=LONG_GRACE_MS)
        pid = wait_for(a.find_host_pid, 10, what='PID 1')
        exe = os.path.realpath(agentd_path())
        wait_for(lambda: os.path.realpath('/proc/%d/exe' % pid) == exe, 10,
                 what='agentd exec\'d')
        time.sleep(0.3)     # into the NIC's wait (2 s)
        os.kill(pid, signal.SIGTERM)
        rc = a.wait(QUICK)
        log = a.stderr()
        self.assertEqual(rc, 0, log)
        self.assertIn('no interface nosuch0', log)
        self.assertIn('shutting down', log)

    def test_no_token_on_the_command_line_leaves_proc_cmdline_alone(self):
        a = self.start_vm('console=ttyS0 quiet', nic=False)
        code, out = a.run('cat /proc/cmdline; grep -c " /proc/cmdline " '
                          '/proc/self/mounts')
        self.assertEqual(out, b'console=ttyS0 quiet\n1\n')
        st, j = a.request('GET', '/healthz')
        self.assertEqual(st, 200, json.dumps(j))

    def test_a_container_ignores_the_hosts_command_line(self):
        # Not a bare VM, not the initial PID namespace: /proc/cmdline is the
        # host kernel's, and its agentd.* and ip= are not this sandbox's.
        a = self.start_vm('console=ttyS0 agentd.token=hostsecret '
                          'agentd.max-sessions=1 ip=%s' % IP, nic=False,
                          env={'AGENTD_READ_KERNEL_CMDLINE': '0'})
        code, out = a.run('cat /proc/cmdline')
        self.assertIn(b'agentd.token=hostsecret', out)     # left alone
        self.assertNotIn('no interface', a.stderr())
        code, out = a.run('/usr/bin/python3 -c \'%s\' %d' %
                          (HTTP_PROBE, a.port))
        self.assertEqual(out.strip(), b'200')             # no token asked
