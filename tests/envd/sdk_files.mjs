// The official E2B JavaScript SDK (npm e2b, pinned in tests/node) against
// agentd's --envd-listen: sandbox.files, in debug mode (no cloud call).
// Usage: node sdk_files.mjs URL TOKEN DIR [EVIL]; DIR is an empty folder
// to work in, EVIL (when root) a symlink another user owns to a folder.
// Prints "ok NAME" per check and exits 1 if any failed.
import { createHash } from 'node:crypto';
import { Sandbox, FileType, FileNotFoundError, InvalidArgumentError,
    SandboxError } from 'e2b';

const [url, token, dir, evil] = process.argv.slice(2);
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
const sha = (b) => createHash('sha256').update(b).digest('hex');

async function main() {
	const sbx = new Sandbox({ sandboxId: 'debug_sandbox_id',
	    envdVersion: '99.99.99', debug: true, sandboxUrl: url,
	    envdAccessToken: token });
	const f = sbx.files;

	// Text and bytes, through multipart (the SDK's default).
	let info = await f.write(dir + '/t/hello.txt', 'hello world');
	check('write text', info.path === dir + '/t/hello.txt' &&
	    info.name === 'hello.txt' && info.type === FileType.FILE, info);
	check('read text', await f.read(dir + '/t/hello.txt') === 'hello world');
	const bytes = new Uint8Array(256).map((_, i) => i);
	await f.write(dir + '/b.bin', bytes);
	const back = await f.read(dir + '/b.bin', { format: 'bytes' });
	check('bytes', back.length === 256 && back.every((v, i) => v === i),
	    back.length);
	let many = await f.write([{ path: dir + '/m1', data: 'one' },
	    { path: dir + '/m2', data: 'two' }]);
	check('write many', many.length === 2 && many[1].path === dir + '/m2',
	    many);
	check('read empty', await f.write(dir + '/empty', '') &&
	    await f.read(dir + '/empty') === '');

	// 8 MiB each way, and gzip (octet-stream) both ways.
	const big = new Uint8Array(8 << 20);
	for (let i = 0; i < big.length; i += 4096)
		big[i] = (i * 2654435761) >>> 24;
	await f.write(dir + '/big.bin', big);
	const bigBack = await f.read(dir + '/big.bin', { format: 'bytes' });
	check('8 MiB', bigBack.length === big.length && sha(bigBack) === sha(big),
	    bigBack.length);
	await f.write(dir + '/gz.bin', big, { gzip: true });
	const gzBack = await f.read(dir + '/gz.bin', { format: 'bytes',
	    gzip: true });
	check('8 MiB gzip', sha(gzBack) === sha(big), gzBack.length);
	const stream = await f.read(dir + '/t/hello.txt', { format: 'stream' });
	let got = '';
	for await (const c of stream)
		got += Buffer.from(c).toString();
	check('read stream', got === 'hello world', got);

	// list, makeDir, rename, exists, getInfo, remove.
	check('makeDir', await f.makeDir(dir + '/d/e') === true);
	check('makeDir again', await f.makeDir(dir + '/d/e') === false);
	let list = await f.list(dir);
	const names = list.map((e) => e.name);
	check('list', JSON.stringify(names) === JSON.stringify(['b.bin',
	    'big.bin', 'd', 'empty', 'gz.bin', 'm1', 'm2', 't']), names);
	list = await f.list(dir, { depth: 2 });
	check('list depth 2', list.length === 10 && list[3].path === dir + '/d/e' &&
	    list[3].type === FileType.DIR, list.map((e) => e.path));
	info = await f.getInfo(dir + '/t/hello.txt');
	check('getInfo', info.size === 11 && info.type === FileType.FILE &&
	    info.permissions === '-rw-r--r--' && info.mode === 0o644 &&
	    info.modifiedTime instanceof Date && info.owner.length > 0, info);
	info = await f.rename(dir + '/t/hello.txt', dir + '/r/renamed.txt');
	check('rename', info.path === dir + '/r/renamed.txt', info);
	check('exists', await f.exists(dir + '/r/renamed.txt') === true &&
	    await f.exists(dir + '/t/hello.txt') === false);
	await f.remove(dir + '/r');
	check('remove', await f.exists(dir + '/r') === false);

	// Metadata: X-Metadata-* headers, kept as user.e2b.* xattrs.
	const meta = { author: 'x', purpose: 'test' };
	info = await f.write(dir + '/meta.txt', 'm', { metadata: meta });
	check('write metadata', JSON.stringify(info.metadata) ===
	    JSON.stringify(meta), info);
	info = await f.getInfo(dir + '/meta.txt');
	check('getInfo metadata', JSON.stringify(info.metadata) ===
	    JSON.stringify(meta), info);
	info = await f.rename(dir + '/meta.txt', dir + '/meta2.txt');
	check('rename keeps metadata', info.metadata &&
	    info.metadata.author === 'x', info);
	info = await f.write(dir + '/meta2.txt', 'n', { useOctetStream: true });
	check('overwrite clears metadata', info.metadata === undefined &&
	    (await f.getInfo(dir + '/meta2.txt')).metadata === undefined, info);
	await f.remove(dir + '/meta2.txt');

	// watchDir: recursive, events with names relative to the folder.
	await f.makeDir(dir + '/w');
	const events = [];
	const h = await f.watchDir(dir + '/w', (ev) => events.push(ev),
	    { recursive: true });
	await f.makeDir(dir + '/w/sub');
	await sleep(200);
	await f.write(dir + '/w/sub/x.txt', 'x');
	await f.remove(dir + '/w/sub/x.txt');
	for (let i = 0; i < 50 && !events.some((e) => e.type === 'remove'); i++)
		await sleep(100);
	await h.stop();
	const seen = events.map((e) => e.name + ':' + e.type);
	check('watchDir', seen.includes('sub:create') &&
	    seen.includes('sub/x.txt:remove') &&
	    seen.some((s) => s.startsWith('sub/x.txt:') || s.startsWith('sub/.')),
	    seen);

	// A write lands in place: the watcher sees WRITE of the file itself.
	await f.write(dir + '/w/in.txt', 'a');
	const inPlace = [];
	const h2 = await f.watchDir(dir + '/w', (ev) => inPlace.push(ev));
	await f.write(dir + '/w/in.txt', 'b');
	for (let i = 0; i < 50 && !inPlace.some((e) => e.type === 'write'); i++)
		await sleep(100);
	await h2.stop();
	check('write in place', inPlace.some((e) => e.name === 'in.txt' &&
	    e.type === 'write') && inPlace.every((e) => e.name === 'in.txt'),
	    inPlace.map((e) => e.name + ':' + e.type));

	// Signed URLs, as a browser would use them.
	await f.write(dir + '/s.txt', 'signed');
	let res = await fetch(await sbx.downloadUrl(dir + '/s.txt'));
	check('downloadUrl', res.status === 200 && await res.text() === 'signed',
	    res.status);
	const form = new FormData();
	form.append('file', new Blob(['up']), 'ignored');
	res = await fetch(await sbx.uploadUrl(dir + '/u.txt',
	    { useSignatureExpiration: 60 }), { method: 'POST', body: form });
	check('uploadUrl', res.status === 200 &&
	    await f.read(dir + '/u.txt') === 'up', res.status);
	res = await fetch(url + '/files?path=' + encodeURIComponent(dir + '/s.txt'));
	check('unsigned refused', res.status === 401, res.status);

	// Bad input.
	let e = await throws(() => f.read(dir + '/none'));
	check('read missing', e instanceof FileNotFoundError, e && e.name);
	e = await throws(() => f.list(dir + '/b.bin'));
	check('list a file', e instanceof InvalidArgumentError, e && e.name);
	e = await throws(() => f.getInfo(dir + '/none'));
	check('getInfo missing', e instanceof FileNotFoundError, e && e.name);
	e = await throws(() => f.watchDir(dir + '/none', () => {}));
	check('watchDir missing', e instanceof FileNotFoundError, e && e.name);
	e = await throws(() => f.read(dir + '/d'));
	check('read a folder', e instanceof InvalidArgumentError, e && e.name);
	if (evil) {
		e = await throws(() => f.read(evil + '/secret'));
		check('read through symlink', e instanceof SandboxError &&
		    /403/.test(e.message), e && e.message);
		e = await throws(() => f.write(evil + '/new', 'x'));
		check('write through symlink', e instanceof SandboxError &&
		    /403/.test(e.message), e && e.message);
		e = await throws(() => f.list(evil));
		check('list through symlink', e !== null &&
		    /permission_denied|symlink/.test(e.message), e && e.message);

		// As envd's: the default user writes where only root could
		// make folders, and what is made is the user's.
		res = await fetch(url + '/init', { method: 'POST',
		    headers: { 'Content-Type': 'application/json',
		    'X-Access-Token': token },
		    body: JSON.stringify({ defaultUser: 'nobody' }) });
		many = await f.write([{ path: dir + '/0/multi_test_file0.txt',
		    data: 'zero' }]);
		info = await f.getInfo(dir + '/0');
		check('write as envd', res.status === 204 && many.length === 1 &&
		    info.owner === 'nobody' && (await f.getInfo(dir +
		    '/0/multi_test_file0.txt')).owner === 'nobody', info);
	}
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
	console.log('FAIL exception: ' + (e && e.stack));
	process.exit(1);
});
