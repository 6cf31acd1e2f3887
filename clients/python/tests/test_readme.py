"""The Python example of docs/clients.md, run as it stands."""

import io
import os
import re

from agentd_client import AgentdError, Client


def readme_example(url, token, out):
    c = Client(url, token=token)

    # exec_command: a short command comes back with its exit code and output.
    r = c.exec_command('echo hello; exit 3')
    out.write(r.text())   # session exec-…\nexit code 3\nhello\n

    # A shell on a tty keeps running; write_stdin answers it by its session id.
    sh = c.exec_command('sh', tty=True, yield_time_ms=500)
    r = c.write_stdin(sh.session_id, 'echo $((6*7))\n', yield_time_ms=1000)
    out.write(r.output)   # echo $((6*7))\r\n42\r\n$

    # Errors carry the API's code.
    try:
        c.read('no-such-session')
    except AgentdError as e:
        if e.code == 'not_found':
            out.write('no such session\n')
    c.delete(sh.session_id, grace_ms=2000)
    c.close()


def test_readme_example(agentd):
    out = io.StringIO()
    readme_example(agentd.url, agentd.token, out)
    assert re.fullmatch(r'session exec-[0-9a-f]+\nexit code 3\nhello\n.*42\r\n.*'
                        r'no such session\n', out.getvalue(), re.S), out.getvalue()
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, '..', '..', '..', 'docs', 'clients.md'), encoding='utf-8') as f:
        readme = f.read()
    with open(os.path.abspath(__file__), encoding='utf-8') as f:
        src = f.read()
    m = re.search(r'```python\n(.*?)```', readme, re.S)
    assert m and m.group(1) in src, \
        "docs/clients.md's Python example is not readme_example in clients/python/tests/test_readme.py"
