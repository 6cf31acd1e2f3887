// The official E2B JavaScript SDK (npm e2b, pinned in tests/node) against
// agentd's --envd-listen: commands and pty, in debug mode (no cloud call).
// Usage: node sdk_process.mjs URL [TOKEN]; prints "ok NAME" per check and
// exits 1 at the first failure.
import { Sandbox, CommandExitError } from 'e2b';

const [url, token] = process.argv.slice(2);
let failed = 0;

function check(name, cond, detail) {
	if (cond) {
		console.log('ok ' + name);
	} else {
		console.log('FAIL ' + name + ': ' + JSON.stringify(detail));
		failed++;
	}
}

async function throws(fn) {
	try {
		await fn();
	} catch (e) {
		return e;
	}
	return null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
	const sbx = token ?
	    new Sandbox({ sandboxId: 'debug_sandbox_id', envdVersion: '99.99.99',
		debug: true, sandboxUrl: url, envdAccessToken: token }) :
	    await Sandbox.create({ debug: true, sandboxUrl: url });

	// Foreground: stdout, stderr, exit code.
	let r = await sbx.commands.run('echo hello; echo oops >&2');
	check('run foreground', r.exitCode === 0 && r.stdout === 'hello\n' &&
	    r.stderr === 'oops\n', r);

	// A non-zero exit throws CommandExitError, spelled as envd does.
	let e = await throws(() => sbx.commands.run('exit 3'));
	check('run exit 3', e instanceof CommandExitError && e.exitCode === 3 &&
	    e.error === 'exit status 3', e && { code: e.exitCode, error: e.error });

	// env and cwd.
	r = await sbx.commands.run('echo $FOO; pwd', { envs: { FOO: 'bar' },
	    cwd: '/tmp' });
	check('run env cwd', r.stdout === 'bar\n/tmp\n', r);
	e = await throws(() => sbx.commands.run('true', { cwd: '/no/such/dir' }));
	check('run missing cwd', e !== null && /cwd/.test(e.message),
	    e && e.message);

	// users: root by default, another by name, an unknown one refused.
	r = await sbx.commands.run('id -un');
	check('run default user root', r.stdout === 'root\n', r);
	r = await sbx.commands.run('id -un', { user: 'nobody', cwd: '/' });
	check('run user nobody', r.stdout === 'nobody\n', r);
	e = await throws(() => sbx.commands.run('true', { user: 'no-such-user' }));
	check('run unknown user', e !== null && e.name === 'AuthenticationError',
	    e && [e.name, e.message]);

	// Timeout: the process is killed, the SDK throws a TimeoutError.
	let t0 = Date.now();
	e = await throws(() => sbx.commands.run('sleep 30', { timeoutMs: 500 }));
	check('run timeout', e !== null && e.name === 'TimeoutError' &&
	    Date.now() - t0 < 10000, e && [e.name, e.message]);

	// Background, list, stdin, closeStdin, wait.
	let h = await sbx.commands.run('cat', { background: true, stdin: true });
	let list = await sbx.commands.list();
	check('list', list.some((p) => p.pid === h.pid), list);
	await sbx.commands.sendStdin(h.pid, 'abc\n');
	await sbx.commands.closeStdin(h.pid);
	r = await h.wait();
	check('background stdin', r.stdout === 'abc\n' && r.exitCode === 0, r);

	// Connect to a running process, then kill it.
	h = await sbx.commands.run('echo first; sleep 1; echo second; sleep 30',
	    { background: true });
	let seen = '';
	const c = await sbx.commands.connect(h.pid,
	    { onStdout: (d) => { seen += d; } });
	for (let i = 0; i < 100 && !seen.includes('second'); i++)
		await sleep(100);
	check('connect output', seen.includes('second'), seen);
	check('kill', await sbx.commands.kill(h.pid) === true, null);
	e = await throws(() => c.wait());
	check('killed ends', e instanceof CommandExitError &&
	    e.error === 'signal: killed', e && e.error);
	check('kill unknown pid', await sbx.commands.kill(999999) === false, null);

	// A killed process is reaped at once: `kill -0` of its pid, run right
	// after, finds nothing, nor does /proc (it was a zombie for up to 1 s).
	// Each is killed once its login shell has started (its `up` seen): a
	// shell killed inside its rc files may leave their locks behind (a
	// pyenv rehash's, where root's .bashrc has one).
	let found = [];
	for (let i = 0; i < 100; i++) {
		let up;
		const ready = new Promise((r) => { up = r; });
		const k = await sbx.commands.run('echo up; exec sleep 30', {
		    background: true, onStdout: (d) => d.includes('up') && up() });
		await Promise.race([ready, sleep(10000)]);
		await sbx.commands.kill(k.pid);
		e = await throws(() => sbx.files.read(`/proc/${k.pid}/stat`));
		if (e === null || e.name !== 'FileNotFoundError')
			found.push([k.pid, e && e.name, e && e.message]);
		if (i % 10 != 0)
			continue;
		e = await throws(() => sbx.commands.run(`kill -0 ${k.pid} 2>/dev/null`));
		if (!(e instanceof CommandExitError))
			found.push(k.pid);
	}
	check('kill reaps', found.length === 0, found);
	e = await throws(() => sbx.commands.connect(999999));
	check('connect unknown pid', e !== null && e.name === 'NotFoundError',
	    e && [e.name, e.message]);

	// PTY: create, input, resize, kill.
	let out = '';
	const dec = new TextDecoder();
	const pty = await sbx.pty.create({ cols: 80, rows: 24,
	    onData: (d) => { out += dec.decode(d); } });
	await sbx.pty.sendInput(pty.pid,
	    new TextEncoder().encode('stty size; echo pty-$((6*7))\n'));
	for (let i = 0; i < 50 && !out.includes('pty-42'); i++)
		await sleep(100);
	check('pty input', out.includes('pty-42') && out.includes('24 80'), out);
	await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 });
	await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'));
	for (let i = 0; i < 50 && !out.includes('30 100'); i++)
		await sleep(100);
	check('pty resize', out.includes('30 100'), out);
	check('pty kill', await sbx.pty.kill(pty.pid) === true, null);
	e = await throws(() => sbx.commands.run(`kill -0 ${pty.pid} 2>/dev/null`));
	check('pty kill reaps', e instanceof CommandExitError, e && e.message);
	e = await throws(() => pty.wait());
	check('pty ended', e !== null, e && e.message);
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
	console.log('FAIL exception: ' + (e && e.stack));
	process.exit(1);
});
