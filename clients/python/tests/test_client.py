"""agentd_client against the real agentd (env AGENTD)."""

import time

import pytest

from agentd_client import (AgentdError, Client, Collector, StdinUncertain)


def lines(n):
    return ''.join('line %d\n' % i for i in range(1, n + 1))


def test_routes(agentd):
    with Client(agentd.url, token=agentd.token) as c:
        h = c.health()
        assert h.status == 'ok' and h.pid > 0 and h.containment and h.generation == 0
        sw = c.create('echo out; echo err >&2; exit 3', id='job.1', yield_ms=5000)
        s = sw.session
        assert (s.id, s.running, s.exit_code, s.oom_killed) == ('job.1', False, 3, False)
        assert s.usage is not None
        streams = {}
        for ch in sw.window.output:
            streams[ch.stream] = streams.get(ch.stream, b'') + ch.data
        assert streams == {'stdout': b'out\n', 'stderr': b'err\n'}
        r = c.read('job.1')
        assert r.window.eof and r.window.cursor == s.last_chunk
        raw = c.read_raw('job.1')
        assert sorted(raw.data.splitlines()) == [b'err', b'out']
        assert raw.eof and raw.state == 'exited' and raw.exit_code == 3
        assert [x.id for x in c.list_sessions()] == ['job.1']
        page, nxt = c.list_sessions_page(1)
        assert [x.id for x in page] == ['job.1'] and nxt is None

        # Errors carry the API's code.
        with pytest.raises(AgentdError) as e:
            c.read('nope')
        assert (e.value.status, e.value.code) == (404, 'not_found')
        with pytest.raises(AgentdError) as e:
            c.read('job.1', cursor=999)
        assert e.value.code == 'invalid_cursor'
        with pytest.raises(AgentdError) as e:
            c.create('true', id='job.1')
        assert e.value.code == 'session_exists' and e.value.session.id == 'job.1'
        with pytest.raises(AgentdError) as e:
            c.signal('job.1', 'SIGINT')
        assert e.value.code == 'session_exited'

        # stdin on pipes, JSON and raw, then follow to the end.
        cat = c.create(argv=['cat']).session
        assert c.stdin(cat.id, text='hello\n', wait_ms=5000).written == 6
        assert c.stdin_raw(cat.id, b'raw\n', eof=True, yield_ms=5000).written == 4
        got = b''.join(ch.data for ch in c.follow(cat.id) if not isinstance(ch, int))
        assert got == b'hello\nraw\n'
        with pytest.raises(AgentdError) as e:
            c.stdin(cat.id, text='x')
        assert e.value.code == 'session_exited'

        # A tty: resize, signals, delete.
        tty = c.create('sleep 60', tty=True, rows=30, cols=100).session
        s = c.resize(tty.id, 40, 120)
        assert (s.rows, s.cols) == (40, 120)
        c.signal(tty.id, 'SIGSTOP', target='group')
        c.signal(tty.id, 18)
        assert not c.delete(tty.id, grace_ms=500).running
        with pytest.raises(AgentdError) as e:
            c.delete(tty.id)
        assert e.value.code == 'not_found'

        # Files.
        p = agentd.work + '/sub/f.txt'
        fw = c.write_file(p, b'data\n', mode='0600', mkdir=True)
        assert fw.size == 5 and len(fw.sha256) == 64
        assert c.read_file(p, offset=1, length=3) == b'ata'
        st = c.stat([p, agentd.dir + '/none'])
        assert (st[0].exists, st[0].type, st[0].mode) == (True, 'file', '0600')
        assert (st[1].exists, st[1].error) == (False, 'ENOENT')
        with pytest.raises(AgentdError) as e:
            c.read_file(agentd.dir)
        assert e.value.code == 'is_a_directory'
        with pytest.raises(AgentdError) as e:
            c.fetch('http://%s/healthz' % agentd.addr, 'rel')
        assert e.value.code == 'invalid_request'
        assert 'agentd_sessions_started_total 3' in c.metrics()


def test_auth_and_unix_socket(agentd):
    with Client(agentd.url, token='wrong') as bad:
        with pytest.raises(AgentdError) as e:
            bad.list_sessions()
        assert e.value.code == 'unauthorized'
    with Client('unix://' + agentd.socket) as u:
        assert u.list_sessions() == []
        assert u.debug_stat()['pid'] > 0
    with Client(agentd.url, token=agentd.token) as c:
        with pytest.raises(AgentdError) as e:
            c.debug_stat()
        assert e.value.code == 'not_found'
    with pytest.raises(ValueError):
        Client('unix://relative.sock')


def test_exec_command(agentd):
    c = Client(agentd.url, token=agentd.token)
    r = c.exec_command('echo hi; exit 3')
    assert (r.running, r.exit_code, r.output, r.omitted_bytes) == (False, 3, 'hi\n', 0)
    assert r.text().startswith('session %s\nexit code 3\nhi\n' % r.session_id)

    # Cut head and tail, the omitted amount exact.
    want = ''.join('%d\n' % i for i in range(1, 100001))
    r = c.exec_command('seq 1 100000', max_output_tokens=100, yield_time_ms=20000)
    marker = '\n[... %d bytes omitted ...]\n' % r.omitted_bytes
    head, _, tail = r.output.partition(marker)
    assert tail and r.original_bytes == len(want)
    assert (len(head), len(tail), r.omitted_bytes) == (200, 200, len(want) - 400)
    assert want.startswith(head) and want.endswith(tail)
    assert '\n%d bytes omitted\n' % r.omitted_bytes in r.text()

    # A running command keeps its session id; write_stdin answers it.
    r = c.exec_command('sh', tty=True, yield_time_ms=500)
    assert r.running and r.exit_code is None and 'still running\n' in r.text()
    sid = r.session_id
    r = c.write_stdin(sid, 'echo $((6*7))\n', yield_time_ms=1000)
    assert r.running and '42' in r.output
    r = c.write_stdin(sid, 'exit 5\n', yield_time_ms=5000)
    assert (r.running, r.exit_code) == (False, 5) and '42' not in r.output
    with pytest.raises(AgentdError) as e:
        c.write_stdin('nope', 'x')
    assert e.value.code == 'not_found'

    # The yield bounds the wait; a later poll gets what followed.
    t0 = time.monotonic()
    r = c.exec_command('echo a; sleep 1.5; echo b', yield_time_ms=300)
    assert r.running and r.output == 'a\n' and time.monotonic() - t0 < 1.2
    r = c.write_stdin(r.session_id, yield_time_ms=5000)
    assert (r.running, r.exit_code, r.output) == (False, 0, 'b\n')
    c.close()


def test_write_stdin_leaves_the_joining_alone(agentd):
    # write_stdin's own stdin write asked max_bytes 1, which makes the
    # session publish one chunk per read from then on (API.md): 100 lines
    # written while nobody looks came back as 100 chunks, not one.
    c = Client(agentd.url, token=agentd.token)
    r = c.exec_command('read x; sleep 1; for i in $(seq 1 100); do echo $i; '
                       'sleep 0.002; done', yield_time_ms=250)
    assert r.running
    c.write_stdin(r.session_id, 'go\n', yield_time_ms=250)
    time.sleep(4)           # nobody looks while the lines are written
    sw = c.read(r.session_id)
    assert not sw.session.running
    w = sw.window
    data = b''.join(ch.data for ch in w.output)
    assert data == ''.join('%d\n' % i for i in range(1, 101)).encode()
    assert len(w.output) < 10, len(w.output)
    c.close()


def test_collector():
    c = Collector(10)
    c.add(0, b'abc')
    c.add(3, b'def')
    assert c.render() == ('abcdef', 0)
    c.add(6, b'ghijklmnop')
    assert c.render() == ('abcde\n[... 6 bytes omitted ...]\nlmnop', 6)
    c = Collector(10)
    c.add(0, b'ab')
    c.add(5, b'xyz')
    assert c.render() == ('ab\n[... 3 bytes omitted ...]\nxyz', 3)
    c = Collector(6)
    c.add(0, 'ééééé'.encode())
    assert c.render() == ('é\n[... 6 bytes omitted ...]\né', 6)


def test_follow_across_cut_connections(agentd, cutter):
    direct = Client(agentd.url, token=agentd.token)
    sid = direct.create('i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "line $i"; '
                        '[ $((i % 100)) -eq 0 ] && sleep 0.02; done',
                        ring_bytes=4 << 20).session.id
    c = Client(cutter.url, token=agentd.token, retries=100)
    got = bytearray()
    for ch in c.follow(sid):
        assert not isinstance(ch, int), 'a gap'
        assert ch.offset == len(got)
        got += ch.data
    assert got.decode() == lines(3000)
    assert cutter.cuts >= 3, (cutter.conns, cutter.cuts)


def test_tools_across_cut_connections(agentd, cutter):
    c = Client(cutter.url, token=agentd.token, retries=100)
    for i in range(5):
        cutter.force = bool(i % 2)      # the create's answer is lost
        r = c.exec_command('i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo "line $i"; done',
                           max_output_tokens=1 << 20, yield_time_ms=20000)
        assert (r.running, r.exit_code, r.omitted_bytes) == (False, 0, 0)
        assert r.output == lines(2000)
    r = c.exec_command('i=0; while [ $i -lt 1500 ]; do i=$((i+1)); echo "line $i"; '
                       '[ $((i % 100)) -eq 0 ] && sleep 0.1; done',
                       yield_time_ms=250, max_output_tokens=1 << 20)
    out = r.output
    polls = 0
    while r.running:
        polls += 1
        assert polls < 200
        r = c.write_stdin(r.session_id, yield_time_ms=300, max_output_tokens=1 << 20)
        out += r.output
    assert out == lines(1500)
    assert cutter.cuts >= 3, (cutter.conns, cutter.cuts)


def test_stdin_is_never_resent(agentd, cutter):
    c = Client(cutter.url, token=agentd.token, retries=100)
    direct = Client(agentd.url, token=agentd.token)
    sid = direct.create(argv=['cat']).session.id
    cutter.force = True
    with pytest.raises(StdinUncertain):
        c.stdin(sid, text='once\n')
    direct.stdin(sid, eof=True)
    got = b''.join(ch.data for ch in direct.follow(sid) if not isinstance(ch, int))
    assert got == b'once\n'


def test_stdin_across_lost_answers(agentd, stdin_cutter):
    """Each write's first try is taken by agentd and its answer dropped: with
    an offset (stdin, stdin_raw) the write is sent again and agentd answers
    the repeat as a duplicate. cat echoes every line exactly once."""
    c = Client(stdin_cutter.url, token=agentd.token)
    direct = Client(agentd.url, token=agentd.token)
    sid = direct.create(argv=['cat']).session.id
    off = 0
    for i in range(1, 11):
        line = 'line %d\n' % i
        if i % 2:
            sw = c.stdin(sid, text=line, offset=off)
        else:
            sw = c.stdin_raw(sid, line.encode(), offset=off)
        off += len(line)
        assert (sw.written, sw.duplicate, sw.session.stdin_bytes) == (0, True, off)
    assert stdin_cutter.stdin_cuts == 10
    direct.stdin(sid, eof=True)
    got = b''.join(ch.data for ch in direct.follow(sid) if not isinstance(ch, int))
    assert got.decode() == lines(10)


def _echoed(direct, sid):
    """What cat sid echoed, all of it (its stdin closed first)."""
    direct.stdin(sid, eof=True)
    return b''.join(ch.data for ch in direct.follow(sid) if not isinstance(ch, int)).decode()


def test_write_stdin_across_lost_answers(agentd, stdin_cutter):
    """write_stdin across lost stdin answers: each write's first try is taken
    by agentd and its answer dropped, and the resend lands as a duplicate. On
    a session the tools did not start they read stdin_bytes first (7 here: a
    line written directly); on one exec_command started they have it from
    the create. cat echoes every line exactly once."""
    c = Client(stdin_cutter.url, token=agentd.token)
    direct = Client(agentd.url, token=agentd.token)
    sid = direct.create(argv=['cat']).session.id
    direct.stdin(sid, text='line 1\n')
    e = c.exec_command('cat', yield_time_ms=250)
    assert e.running
    out = ''
    for i in range(2, 7):
        c.write_stdin(sid, 'line %d\n' % i)
        out += c.write_stdin(e.session_id, 'line %d\n' % i).output
    assert stdin_cutter.stdin_cuts == 10
    assert _echoed(direct, sid) == lines(6)
    direct.stdin(e.session_id, eof=True)
    r = c.write_stdin(e.session_id, yield_time_ms=5000)
    assert not r.running
    assert out + r.output == lines(6)[len('line 1\n'):]


def test_write_stdin_uncertain_and_mismatch(agentd, stdin_cutter):
    """write_stdin reads stdin_bytes again after a write whose outcome stayed
    unknown (no retries here), so its next write neither repeats nor leaves
    a gap; a count that no longer holds (the session deleted and created
    again under its id) raises stdin_offset_mismatch once, then agentd's
    count is used."""
    c = Client(stdin_cutter.url, token=agentd.token, retries=0)
    direct = Client(agentd.url, token=agentd.token)
    direct.create(argv=['cat'], id='u')
    with pytest.raises(StdinUncertain):
        c.write_stdin('u', 'a\n')
    c.write_stdin('u', 'b\n')
    stdin_cutter.stdin_every = 0
    assert _echoed(direct, 'u') == 'a\nb\n'

    # A session with no output, so that the tools' cursor (0) stays valid
    # for the next one of that id.
    direct.create('cat >/dev/null', id='job')
    c.write_stdin('job', 'a\n')
    _echoed(direct, 'job')
    direct.delete('job', grace_ms=0)
    direct.create(argv=['cat'], id='job')
    with pytest.raises(AgentdError) as e:
        c.write_stdin('job', 'c\n')
    assert (e.value.code, e.value.stdin_bytes) == ('stdin_offset_mismatch', 0)
    assert c.write_stdin('job', 'c\n', yield_time_ms=1000).output == 'c\n'
    assert _echoed(direct, 'job') == 'c\n'


def test_sandbox(agentd):
    # agentd runs with --clock-step 0: the machine's clock is never stepped.
    c = Client(agentd.url, token=agentd.token)
    assert c.sandbox_pause() == 0
    r = c.sandbox_resumed()
    assert (r.generation, r.same_restore, r.clock) == (1, False, 'none')
    with pytest.raises(AgentdError) as e:
        c.sandbox_resumed(entropy=b'short')
    assert e.value.code == 'invalid_request'
    assert c.health().generation == 1


def test_events(agentd):
    c = Client(agentd.url, token=agentd.token)
    c.create('sleep 0.2; exit 4', id='ev')
    # One long-poll: "any of my sessions exited".
    p = c.events(wait_ms=10000, types=['session.exited'])
    assert [(e.type, e.session, e.fields['exit_code']) for e in p.events] == \
        [('session.exited', 'ev', 4)]
    assert p.cursor >= p.events[0].id
    p = c.events(session='ev')
    assert [e.type for e in p.events] == ['session.created', 'session.exited']
    assert p.dropped_events == 0
    with pytest.raises(AgentdError) as e:
        c.events(cursor=999)
    assert e.value.code == 'invalid_cursor'


def test_stream(agentd, stream_cutter):
    direct = Client(agentd.url, token=agentd.token)
    cut = Client(stream_cutter.url, token=agentd.token, retries=1000, backoff=0.001)
    for c in (direct, cut):
        sid = direct.create('i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "line $i"; '
                            '[ $((i % 100)) -eq 0 ] && sleep 0.02; done; exit 7',
                            ring_bytes=4 << 20).session.id
        got = bytearray()
        items = list(c.stream(sid))
        for ch in items[:-1]:
            assert not isinstance(ch, int), 'a gap'
            assert ch.offset == len(got)
            got += ch.data
        assert got.decode() == lines(3000)
        assert items[-1].exit_code == 7
    assert stream_cutter.cuts >= 2
    with pytest.raises(AgentdError) as e:
        list(direct.stream('nope'))
    assert e.value.code == 'not_found'


def test_ports(agentd):
    c = Client(agentd.url, token=agentd.token)
    sw = c.create(argv=['python3', '-c',
                        'import socket, time\ns = socket.socket()\n'
                        's.bind(("127.0.0.1", 0))\ns.listen()\n'
                        'print(s.getsockname()[1], flush=True)\ntime.sleep(60)'],
                  id='srv', wait_ms=10000)
    port = int(b''.join(ch.data for ch in sw.window.output))
    ps = c.ports(port=port, wait_ms=10000)
    assert [(p.port, p.protocol, p.session) for p in ps] == [(port, 'tcp', 'srv')]
    assert ps[0].pid
    assert c.ports()
    with pytest.raises(AgentdError) as e:
        c.ports(port=70000)
    assert e.value.code == 'invalid_request'
    c.delete('srv', grace_ms=0)


def test_chunk_text_or_data():
    from agentd_client.types import Window
    w = Window.parse({'output': [
        {'id': 1, 'stream': 'stdout', 'offset': 0, 'text': 'h\u00e9\u0000\n'},
        {'id': 2, 'stream': 'stdout', 'offset': 5, 'data': '/w=='}],
        'cursor': 2, 'dropped_chunks': 0, 'more': False, 'eof': False})
    a, b = w.output
    assert a.is_text and a.data == b'h\xc3\xa9\x00\n' and a.text == 'h\u00e9\x00\n'
    assert not b.is_text and b.data == b'\xff' and b.text == '\ufffd'
    assert w.data == b'h\xc3\xa9\x00\n\xff'


def test_encoding_text(agentd):
    with Client(agentd.url, token=agentd.token) as c:
        sw = c.create("printf 'h\\303\\251llo\\n'", yield_ms=5000, encoding='text')
        assert [ch.is_text for ch in sw.window.output] == [True]
        assert sw.window.text == 'h\u00e9llo\n'
        # windows of 2 bytes: the cursor goes on inside the chunk
        got, cursor = b'', 0
        while True:
            r = c.read(sw.session.id, cursor=cursor, max_bytes=2, encoding='text')
            got += r.window.data
            cursor = r.window.cursor
            if r.window.eof:
                break
        assert got == 'h\u00e9llo\n'.encode()
