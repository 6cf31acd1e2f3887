// agentd's /mcp through the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned by tests/node/package-lock.json).
// Run by test_mcp.py, which starts agentd and gives this script its URL and
// token: node mcp_client.mjs http://127.0.0.1:PORT/mcp TOKEN
// Prints "ok NAME" per check; exits 1 at the first that fails.
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from
    '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token] = process.argv.slice(2);

// The example of docs/clients.md ("MCP"), as it runs.
// README-BEGIN
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'example', version: '1.0.0' });
await client.connect(transport);

const run = await client.callTool({
  name: 'exec_command',
  arguments: { cmd: 'echo hi', yield_time_ms: 5000 },
});
console.log(run.content[0].text);   // session s1\nexit code 0\nhi
console.log(run.structuredContent); // { session_id: 's1', exit_code: 0, ... }
// README-END

function check(name, fn) {
  return Promise.resolve().then(fn).then(() => console.log(`ok ${name}`),
      (e) => {
        console.log(`FAIL ${name}: ${e.stack || e}`);
        process.exit(1);
      });
}

const call = (name, args) => client.callTool({ name, arguments: args });

await check('initialize', () => {
  assert.equal(client.getServerVersion().name, 'agentd');
  assert.ok(client.getServerCapabilities().tools);
  assert.equal(transport.protocolVersion, '2025-11-25');
  assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
});

await check('tools/list', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name),
      ['exec_command', 'write_stdin', 'list_sessions', 'kill_session']);
  const exec = tools[0];
  assert.deepEqual(Object.keys(exec.inputSchema.properties),
      ['cmd', 'workdir', 'tty', 'yield_time_ms', 'max_output_tokens',
        'shell', 'login']);
  assert.deepEqual(exec.inputSchema.required, ['cmd']);
  assert.deepEqual(Object.keys(tools[1].inputSchema.properties),
      ['session_id', 'chars', 'yield_time_ms', 'max_output_tokens']);
  for (const t of tools)
    assert.equal(t.outputSchema.type, 'object');
});

await check('echo hi', () => {
  const id = run.structuredContent.session_id;
  assert.equal(typeof id, 'string');
  assert.deepEqual(run.structuredContent, { session_id: id, exit_code: 0,
    running: false, omitted_bytes: 0, output: 'hi\n' });
  assert.equal(run.isError, false);
  assert.equal(run.content[0].text, `session ${id}\nexit code 0\nhi\n`);
});

await check('exit code and stderr', async () => {
  const r = await call('exec_command',
      { cmd: 'echo out; echo err >&2; exit 3', yield_time_ms: 5000 });
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.structuredContent.running, false);
  assert.match(r.structuredContent.output, /out\n/);
  assert.match(r.structuredContent.output, /err\n/);
});

await check('bash on a tty, answered with write_stdin', async () => {
  const r = await call('exec_command', { cmd: 'bash --norc --noprofile',
    tty: true, yield_time_ms: 500 });
  const sc = r.structuredContent;
  assert.equal(sc.running, true);
  assert.equal(sc.exit_code, null);
  assert.match(r.content[0].text, new RegExp(`^session ${sc.session_id}\n` +
      'still running\n'));
  let out = '';
  for (let i = 0; i < 20 && !out.includes('42'); i++) {
    const w = await call('write_stdin', { session_id: sc.session_id,
      chars: i === 0 ? 'echo $((6 * 7))\n' : '', yield_time_ms: 300 });
    assert.equal(w.isError, false);
    out += w.structuredContent.output;
  }
  assert.match(out, /[\r\n]42\r\n/);  // bash may add bracketed paste's modes
  const end = await call('write_stdin', { session_id: sc.session_id,
    chars: 'exit 7\n', yield_time_ms: 10000 });
  assert.equal(end.structuredContent.running, false);
  assert.equal(end.structuredContent.exit_code, 7);
  assert.doesNotMatch(end.structuredContent.output, /42/);  // said before
  assert.match(end.content[0].text, /^session \S+\nexit code 7\n/);
});

await check('head and tail kept, the rest omitted', async () => {
  const r = await call('exec_command', { cmd: 'seq 1 100000',
    max_output_tokens: 100, yield_time_ms: 10000 });
  const sc = r.structuredContent;
  assert.equal(sc.exit_code, 0);
  assert.equal(sc.output.length, 400);
  assert.ok(sc.output.startsWith('1\n2\n3\n'));
  assert.ok(sc.output.endsWith('99999\n100000\n'));
  assert.equal(sc.omitted_bytes, 588895 - 400);
  assert.match(r.content[0].text, /^session \S+\nexit code 0\n588495 bytes omitted\n1\n2\n/);
  assert.ok(r.content[0].text.includes('\n69\n70\n[... 588495 bytes omitted ...]\n'));
});

await check('unknown session', async () => {
  for (const tool of ['write_stdin', 'kill_session']) {
    const r = await call(tool, { session_id: 'nope' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /no session 'nope'/);
  }
});

await check('bad arguments are tool errors', async () => {
  let r = await call('exec_command', { cmd: 42 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /'cmd' is a non-empty string/);
  r = await call('exec_command', { cmd: 'true', bogus: 1 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /unknown argument 'bogus'/);
  r = await call('exec_command', { cmd: 'true', workdir: '/no/such/dir' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /^spawn_failed: /);
});

await check('list_sessions and kill_session', async () => {
  const r = await call('exec_command', { cmd: 'sleep 100',
    yield_time_ms: 250 });
  const id = r.structuredContent.session_id;
  let l = await call('list_sessions', {});
  const mine = l.structuredContent.sessions.find((s) => s.session_id === id);
  assert.deepEqual(mine, { session_id: id, running: true, exit_code: null,
    tty: false, command: '/bin/sh -c sleep 100' });
  assert.match(l.content[0].text, new RegExp(`^${id} running: /bin/sh -c ` +
      'sleep 100$', 'm'));
  const k = await call('kill_session', { session_id: id });
  assert.equal(k.structuredContent.running, false);
  assert.equal(k.structuredContent.exit_code, 143);  // SIGTERM
  l = await call('list_sessions', {});
  assert.ok(!l.structuredContent.sessions.some((s) => s.session_id === id));
});

await check('unknown tool is a JSON-RPC error', async () => {
  await assert.rejects(call('no_such_tool', {}),
      (e) => e.code === -32602 && /unknown tool 'no_such_tool'/.test(e.message));
});

await check('401 without the token', async () => {
  const anon = new Client({ name: 'anon', version: '1.0.0' });
  await assert.rejects(anon.connect(new StreamableHTTPClientTransport(
      new URL(url))), (e) => e instanceof StreamableHTTPError &&
      e.code === 401);
});

await check('DELETE ends the MCP session', async () => {
  await transport.terminateSession();
  assert.equal(transport.sessionId, undefined);
  await client.close();
});
