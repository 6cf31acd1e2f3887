// The web terminal in a real browser: Debian's chromium, headless, driven by
// puppeteer-core (tests/web/node_modules, pinned by its lockfile). Run by
// test_web.py, one scenario a run, against an agentd it started:
//   AGENTD_URL=http://127.0.0.1:PORT AGENTD_TOKEN=T WEB_OUT=DIR \
//     node web_test.mjs SCENARIO
// Prints one JSON line of facts for the Python side to check (it checks
// some itself and exits 1 with the reason on a failure).
import puppeteer from 'puppeteer-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BASE = process.env.AGENTD_URL;
const TOKEN = process.env.AGENTD_TOKEN || '';
const OUT = process.env.WEB_OUT || os.tmpdir();
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SLOW = Math.max(1, Number(process.env.AGENTD_IT_SLOW) || 1);
const WAIT_MS = 20000 * SLOW;
const facts = {};

function fail(msg) {
	throw new Error(msg);
}

function check(cond, msg) {
	if (!cond)
		fail(msg);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The API from node, with the token (the test's own client).
async function api(method, p, body) {
	const headers = TOKEN ? { Authorization: 'Bearer ' + TOKEN } : {};
	if (body !== undefined)
		headers['Content-Type'] = 'application/json';
	const r = await fetch(BASE + p, { method, headers,
	    body: body === undefined ? undefined : JSON.stringify(body) });
	const text = await r.text();
	if (!r.ok)
		fail(`${method} ${p}: ${r.status} ${text}`);
	return JSON.parse(text);
}

async function create(fields) {
	return api('POST', '/v1/sessions', { tty: true, rows: 24, cols: 80, ...fields });
}

async function session(id) {
	return api('GET', `/v1/sessions/${id}?max_bytes=1`);
}

// Every byte of a session's output the ring holds, as a string.
async function output(id) {
	let cursor = 0, out = Buffer.alloc(0);
	for (;;) {
		const w = await api('GET', `/v1/sessions/${id}?cursor=${cursor}&max_bytes=1048576`);
		for (const c of w.output)
			out = Buffer.concat([out, Buffer.from(c.data, 'base64')]);
		cursor = w.cursor;
		if (!w.more)
			return out.toString('utf8');
	}
}

async function waitFor(what, fn, ms = WAIT_MS) {
	const end = Date.now() + ms;
	let last;
	for (;;) {
		last = await fn();
		if (last)
			return last;
		if (Date.now() > end)
			fail(`timed out waiting for ${what}`);
		await sleep(50);
	}
}

let browser;
const pages = [];
let userDir;

async function launch() {
	userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-web-chromium-'));
	browser = await puppeteer.launch({
		executablePath: CHROMIUM,
		ignoreDefaultArgs: true,
		pipe: true,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
		    '--no-first-run', '--disable-background-networking',
		    '--disable-component-update', '--disable-sync',
		    '--user-data-dir=' + userDir, 'about:blank'],
		timeout: 30000 * SLOW,
		protocolTimeout: 60000 * SLOW,
	});
}

// A page with its requests recorded (URL, method, headers).
async function newPage(width = 900, height = 600) {
	const page = await browser.newPage();
	pages.push(page);
	await page.setViewport({ width, height });
	page.requests = [];
	page.errors = [];
	page.on('request', (r) => page.requests.push({ url: r.url(), method: r.method(), headers: r.headers() }));
	page.on('pageerror', (e) => page.errors.push(String(e)));
	page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
	return page;
}

async function open(page, query = '', withToken = true) {
	await page.goto(`${BASE}/term/${query}${withToken ? '#token=' + TOKEN : ''}`, { waitUntil: 'load' });
}

// What the terminal shows, by xterm.js's screen reader rows (screenReaderMode).
// A page in a background tab does not render (no animation frames): each
// look brings its page to the front.
async function screen(page) {
	await page.bringToFront();
	return page.evaluate(() => {
		const rows = document.querySelectorAll('.xterm-accessibility-tree > div');
		return Array.from(rows, (r) => r.textContent.replace(/\s+$/, '')).join('\n');
	}).catch(() => '');
}

async function waitScreen(page, what, re) {
	return waitFor(`${what} on the page`, async () => {
		const s = await screen(page);
		return re.test(s) ? s : null;
	});
}

// (Empty while a page navigates.)
async function status(page) {
	return page.$eval('#status', (e) => e.textContent).catch(() => '');
}

async function waitStatus(page, re) {
	return waitFor(`status ${re}`, async () => re.test(await status(page)));
}

async function termSize(page) {
	const s = await page.$eval('#size', (e) => e.textContent);
	const m = /^(\d+)x(\d+)$/.exec(s);
	return m ? { cols: +m[1], rows: +m[2] } : null;
}

// Types text as keys: ASCII by puppeteer's layout, other characters as the
// key events a keyboard of that language sends (keydown with the text).
async function typeKeys(page, text) {
	const cdp = await page.createCDPSession();
	for (const ch of text) {
		if (ch.charCodeAt(0) < 128) {
			await page.keyboard.type(ch);
			continue;
		}
		await cdp.send('Input.dispatchKeyEvent', { type: 'keyDown', key: ch, text: ch, unmodifiedText: ch });
		await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', key: ch });
	}
	await cdp.detach();
}

function count(hay, needle) {
	return hay.split(needle).length - 1;
}

// ---- scenarios -------------------------------------------------------------

const scenarios = {
	// Scrollback first, then typing (UTF-8, paste, control keys) once.
	async attach() {
		const s = await create({ rows: 30, cols: 100, cmd:
		    "printf 'scroll-%s\\n' 1 2 3 4 5; stty -echo; " +
		    "IFS= read -r a; printf 'got[%s]\\n' \"$a\"; " +
		    "IFS= read -r b; printf 'pasted[%s]\\n' \"$b\"; " +
		    "trap 'echo INT-caught; exit 7' INT; echo waiting; sleep 30 & wait; echo no-int" });
		await waitFor('scroll-5', async () => (await output(s.id)).includes('scroll-5'));
		const page = await newPage(1000, 620);
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'scrollback', /scroll-1[\s\S]*scroll-5/);
		const typed = 'héllo wörld ✓ ~';
		await typeKeys(page, typed);
		await page.keyboard.press('Enter');
		await waitScreen(page, 'the typed line', /got\[héllo wörld ✓ ~\]/);
		// A paste, as the clipboard would deliver it.
		const pasted = 'a pasted line';
		await page.evaluate((t) => {
			const dt = new DataTransfer();
			dt.setData('text/plain', t);
			document.querySelector('.xterm-helper-textarea').dispatchEvent(
			    new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
		}, pasted);
		await page.keyboard.press('Enter');
		await waitScreen(page, 'the pasted line', /pasted\[a pasted line\]/);
		await waitScreen(page, 'waiting', /waiting/);
		await page.keyboard.down('Control');
		await page.keyboard.press('KeyC');
		await page.keyboard.up('Control');
		const text = await waitScreen(page, 'the interrupt', /INT-caught/);
		await waitStatus(page, /exit code 7/);
		const after = await session(s.id);
		const want = Buffer.byteLength(typed) + 1 + pasted.length + 1 + 1;
		facts.stdin_bytes = after.stdin_bytes;
		facts.stdin_expected = want;
		check(after.stdin_bytes === want, `stdin_bytes ${after.stdin_bytes}, typed ${want}`);
		const out = await output(s.id);
		check(count(out, 'got[héllo wörld ✓ ~]') === 1, 'the typed line once in the output');
		check(count(text, 'got[héllo wörld ✓ ~]') === 1, 'the typed line once on the page');
		check(count(text, 'scroll-3') === 1, 'scrollback once');
		check(!/no-int/.test(out), 'Ctrl-C reached the session');
		facts.status = await status(page);
		check(page.errors.length === 0, 'page errors: ' + page.errors.join('; '));
		// Exited: still readable, after a reload too.
		await page.reload({ waitUntil: 'load' });
		await waitStatus(page, /exit code 7/);
		await waitScreen(page, 'the output after the exit', /scroll-1[\s\S]*INT-caught/);
	},

	// Output written by another client (the API) reaches the page.
	async other() {
		const s = await create({ cmd: 'stty -echo; cat' });
		const page = await newPage();
		await open(page, `?session=${s.id}`);
		await waitStatus(page, /^live/);
		await api('POST', `/v1/sessions/${s.id}/stdin`, { text: 'from-another-client<b id=inj>\n' });
		await waitScreen(page, 'the other client\'s line', /from-another-client<b id=inj>/);
		check(count(await screen(page), 'from-another-client') === 1, 'once');
		check(await page.evaluate(() => document.getElementById('inj') === null), 'output became HTML');
		// The answer to the page's first stdin write is lost after agentd
		// took it (a connection reset): the retry, same offset, is a
		// duplicate, and the keys reach the session once.
		const cdp = await page.createCDPSession();
		let lost = 0;
		cdp.on('Fetch.requestPaused', async (ev) => {
			if (ev.request.method === 'POST' && lost === 0) {
				lost++;
				await cdp.send('Fetch.failRequest', { requestId: ev.requestId, errorReason: 'ConnectionReset' });
			} else {
				await cdp.send('Fetch.continueRequest', { requestId: ev.requestId });
			}
		});
		await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*/stdin', requestStage: 'Response' }] });
		await page.keyboard.type('typed-once\n');
		await waitScreen(page, 'the typed line', /typed-once/);
		await sleep(500);
		check(lost === 1, 'no answer was lost');
		const after = await session(s.id);
		facts.stdin_bytes = after.stdin_bytes;
		facts.stdin_expected = 'from-another-client<b id=inj>\n'.length + 'typed-once\n'.length;
		check(after.stdin_bytes === facts.stdin_expected, `stdin_bytes ${after.stdin_bytes}`);
		check(count(await output(s.id), 'typed-once') === 1, 'typed-once twice in the output');
		facts.stdin_posts = page.requests.filter((r) => r.url.endsWith('/stdin')).length;
	},

	// Two viewers at once (one driving, one view only) see the same bytes.
	async viewers() {
		const s = await create({ rows: 20, cols: 70, cmd:
		    "sleep 1; for i in $(seq 1 15); do printf '\\033[3%dmv-%02d\\033[0m ✓\\n' $((i % 7)) $i; sleep 0.05; done; sleep 30" });
		const a = await newPage(800, 500);
		const b = await newPage(800, 500);
		await Promise.all([open(a, `?session=${s.id}&view=1`), open(b, `?session=${s.id}&view=1`)]);
		const ta = await waitScreen(a, 'v-15 (viewer 1)', /v-15/);
		const tb = await waitScreen(b, 'v-15 (viewer 2)', /v-15/);
		facts.screen = ta;
		check(ta === tb, `the viewers differ:\n${ta}\n---\n${tb}`);
		for (let i = 1; i <= 15; i++)
			check(count(ta, `v-${String(i).padStart(2, '0')}`) === 1, `v-${i} once`);
	},

	// view=1 sends nothing: no stdin, no resize, no POST at all.
	async viewonly() {
		const s = await create({ rows: 24, cols: 80, cmd: "echo ready; sleep 30" });
		const page = await newPage(1200, 700);
		await open(page, `?session=${s.id}&view=1`);
		await waitScreen(page, 'ready', /ready/);
		await page.click('#term');
		await page.keyboard.type('typed in a viewer\n');
		await page.setViewport({ width: 700, height: 400 });
		await sleep(1500);
		const after = await session(s.id);
		facts.stdin_bytes = after.stdin_bytes;
		check(after.stdin_bytes === 0, 'the viewer wrote stdin');
		check(after.rows === 24 && after.cols === 80, `the viewer resized: ${after.cols}x${after.rows}`);
		const posts = page.requests.filter((r) => r.method !== 'GET');
		check(posts.length === 0, 'the viewer sent ' + posts.map((r) => r.method + ' ' + r.url).join(', '));
		check(JSON.stringify(await termSize(page)) === '{"cols":80,"rows":24}', 'shown at the PTY\'s size');
	},

	// The page's size reaches the PTY (stty size); the last to resize wins.
	async stty() {
		const s = await create({ rows: 24, cols: 80, cmd: 'stty -echo; while IFS= read -r l; do echo "size[$(stty size)]"; done' });
		const a = await newPage(900, 500);
		await open(a, `?session=${s.id}`);
		await waitStatus(a, /^live/);
		const sa = await waitFor('a size', async () => {
			const z = await termSize(a);
			return z && !(z.cols === 80 && z.rows === 24) ? z : null;
		});
		await a.keyboard.press('Enter');
		await waitScreen(a, 'stty size', new RegExp(`size\\[${sa.rows} ${sa.cols}\\]`));
		facts.first = sa;
		// A window resize of the driving page.
		await a.setViewport({ width: 700, height: 420 });
		const sb = await waitFor('the new size', async () => {
			const z = await termSize(a);
			return z && z.cols !== sa.cols ? z : null;
		});
		await a.keyboard.press('Enter');
		await waitScreen(a, 'stty size after the resize', new RegExp(`size\\[${sb.rows} ${sb.cols}\\]`));
		facts.resized = sb;
		// A second driver resizes last: its size wins, and the first page follows.
		const b = await newPage(1100, 640);
		await open(b, `?session=${s.id}`);
		const sc = await waitFor('the second driver\'s size', async () => {
			const p = await session(s.id);
			const z = await termSize(b);
			return z && p.cols === z.cols && p.rows === z.rows && z.cols > sb.cols ? z : null;
		});
		facts.last = sc;
		await waitFor('the first page to follow', async () =>
		    JSON.stringify(await termSize(a)) === JSON.stringify(sc));
		await a.keyboard.press('Enter');
		await waitScreen(a, 'stty size of the last resize', new RegExp(`size\\[${sc.rows} ${sc.cols}\\]`));
		facts.last = sc;
		// A pipe session is shown, never resized.
		const p = await create({ tty: false, cmd: 'echo pipe-line; sleep 30' });
		await open(b, `?session=${p.id}`);
		await waitScreen(b, 'the pipe\'s output', /pipe-line/);
		await sleep(300);
		check(!b.requests.some((r) => r.url.endsWith(`/${p.id}/resize`)), 'a pipe session was resized');
	},

	// Offline for 2 s while numbered lines print: each line once after.
	async offline() {
		const s = await create({ rows: 50, cols: 80, cmd:
		    "sleep 0.5; for i in $(seq 1 40); do echo n-$i; sleep 0.1; done; echo all-done" });
		const page = await newPage(900, 1000);
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'n-5', /n-5\b/);
		await page.setOfflineMode(true);
		const t0 = Date.now();
		await waitStatus(page, /reconnecting/);
		facts.reconnecting_after_ms = Date.now() - t0;
		await sleep(2000 - (Date.now() - t0));
		const during = await screen(page);
		await page.setOfflineMode(false);
		const text = await waitScreen(page, 'all-done', /all-done/);
		for (let i = 1; i <= 40; i++)
			check(count(text + '\n', `n-${i}\n`) === 1, `n-${i} shown ${count(text + '\n', `n-${i}\n`)} times`);
		facts.lines_seen_offline = (during.match(/n-\d+/g) || []).length;
		check(facts.lines_seen_offline < 40, 'the page was not offline while the lines printed');
		await waitStatus(page, /exit code 0/);
	},

	// A live upgrade while lines print: each line once, the page goes on.
	async upgrade() {
		const s = await create({ rows: 50, cols: 80, cmd:
		    "sleep 0.5; for i in $(seq 1 30); do echo u-$i; sleep 0.1; done; echo all-done; sleep 30" });
		const page = await newPage(900, 1000);
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'u-5', /u-5\b/);
		const before = (await api('GET', '/healthz')).upgrades;
		await api('POST', '/v1/sandbox/upgrade', { path: process.env.UPGRADE_PATH });
		await waitFor('the upgrade', async () => (await api('GET', '/healthz')).upgrades === before + 1);
		const text = await waitScreen(page, 'all-done', /all-done/);
		for (let i = 1; i <= 30; i++)
			check(count(text + '\n', `u-${i}\n`) === 1, `u-${i} shown ${count(text + '\n', `u-${i}\n`)} times`);
		facts.upgrades = before + 1;
	},

	// The evicted part of the ring shows as a marked line.
	async gap() {
		const s = await create({ ring_bytes: 4096, cmd: "for i in $(seq 1 400); do echo gap-line-$i; done; echo gap-end; sleep 30" });
		await waitFor('gap-end', async () => (await output(s.id)).includes('gap-end'));
		const page = await newPage();
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'the end', /gap-end/);
		// Scrolled to the top: the marked line, then the oldest line held.
		await page.keyboard.down('Shift');
		for (let i = 0; i < 12; i++)
			await page.keyboard.press('PageUp');
		await page.keyboard.up('Shift');
		const top = await waitScreen(page, 'the marked line', /^\[agentd: \d+ bytes of output evicted from the ring\]\n/);
		facts.top = top.split('\n').slice(0, 3);
		const end = await output(s.id);
		const first = /^([^\r\n]*)\r\n/.exec(end);
		check(first && top.split('\n')[1] === first[1], `the oldest line held follows the mark: ${facts.top}`);
	},

	// The token: from the fragment, gone from the address bar, never in a
	// URL, localStorage or a cookie; a wrong one shows "unauthorized".
	async token() {
		const s = await create({ cmd: 'echo token-session; sleep 30' });
		// A wrong token first.
		const bad = await newPage();
		await bad.goto(`${BASE}/term/#token=wrong${TOKEN.slice(5)}`, { waitUntil: 'load' });
		await waitFor('unauthorized', async () => /unauthorized/i.test(await bad.$eval('#error', (e) => e.textContent)));
		const body = await bad.evaluate(() => document.body.innerText);
		check(!body.includes(s.id + '\t') && !/token-session|echo/.test(body), 'a wrong token showed sessions');
		check(await bad.$eval('#tokenform', (e) => !e.hidden), 'no Token field');
		const label = await bad.$eval('label[for=token]', (e) => e.textContent);
		check(label === 'Token', 'the field is labelled ' + label);
		// The right token in the field.
		await bad.type('#token', TOKEN);
		await bad.keyboard.press('Enter');
		await waitFor('the list', async () => (await bad.$$eval('#sessions tbody tr', (r) => r.length)) >= 1);
		// The fragment.
		const page = await newPage();
		await open(page, '');
		await waitFor('the list', async () => (await page.$$eval('#sessions tbody tr', (r) => r.length)) >= 1);
		facts.url_after = page.url();
		check(!page.url().includes(TOKEN) && !page.url().includes('#'), 'the token stayed in the address bar: ' + page.url());
		// Live: a session created now appears.
		const s2 = await create({ cmd: 'sleep 30 # <img id=inj src=x>' });
		await waitFor('the new session in the list', async () =>
		    (await page.$$eval('#sessions tbody tr', (r) => r.map((x) => x.dataset.session))).includes(s2.id));
		const row = await page.$eval(`#sessions tbody tr[data-session="${s2.id}"]`, (e) => e.innerText);
		facts.row = row;
		check(/sleep 30 # <img id=inj src=x>/.test(row) && /running/.test(row), 'the row ' + row);
		check(await page.evaluate(() => document.getElementById('inj') === null), 'a command became HTML');
		// New shell: a login shell in this tab.
		await Promise.all([page.waitForNavigation({ timeout: WAIT_MS }), page.click('#newshell')]);
		check(/[?&]session=/.test(new URL(page.url()).search), 'New shell opened ' + page.url());
		await waitStatus(page, /^live/);
		await page.keyboard.type('echo shell-$((6*7))\n');
		await waitScreen(page, 'the shell', /shell-42/);
		const id = new URL(page.url()).searchParams.get('session');
		facts.new_shell = (await session(id)).argv;
		const store = await page.evaluate(() => ({ local: localStorage.length, cookie: document.cookie,
		    session: Object.keys(sessionStorage) }));
		facts.storage = store;
		check(store.local === 0 && store.cookie === '', 'localStorage or cookie used');
		const cookies = await page.cookies();
		check(cookies.length === 0, 'cookies: ' + JSON.stringify(cookies));
		for (const p of [bad, page]) {
			for (const r of p.requests) {
				// The fragment is the page's own (never sent): the request's URL.
				check(!r.url.split('#')[0].includes(TOKEN), 'the token in a URL: ' + r.url);
				check(!('x-access-token' in r.headers) && !('cookie' in r.headers), 'x-access-token or cookie sent');
				if (new URL(r.url).pathname.startsWith('/v1/') && r.headers.authorization !== undefined)
					check(/^Bearer /.test(r.headers.authorization), 'Authorization ' + r.headers.authorization);
			}
		}
		const apiReqs = page.requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/'));
		check(apiReqs.length > 0 && apiReqs.every((r) => r.headers.authorization === 'Bearer ' + TOKEN),
		    'an API request without the bearer token');
		facts.api_requests = apiReqs.length;
		// A wrong token put into the address bar of the open session: the
		// terminal goes, "unauthorized" comes.
		await page.evaluate(() => { location.hash = '#token=not-the-token'; });
		await waitFor('unauthorized', async () => /unauthorized/i.test(await page.$eval('#error', (e) => e.textContent)));
		check(await page.$eval('#term', (e) => e.hidden && e.childElementCount === 0), 'the terminal stayed');
		check(!/shell-42/.test(await page.evaluate(() => document.body.innerText)), 'output stayed');
		check(!page.url().includes('#'), 'the fragment stayed: ' + page.url());
	},

	// An agentd without a token (loopback): no Token field, no header.
	async notoken() {
		check(TOKEN === '', 'run against an agentd without a token');
		const s = await create({ cmd: 'stty -echo; cat' });
		const page = await newPage();
		await open(page, '', false);
		await waitFor('the list', async () =>
		    (await page.$$eval('#sessions tbody tr', (r) => r.map((x) => x.dataset.session))).includes(s.id));
		check(await page.$eval('#tokenform', (e) => e.hidden), 'asked for a token');
		await open(page, `?session=${s.id}`, false);
		await waitStatus(page, /^live/);
		await page.keyboard.type('no-token-line\n');
		await waitScreen(page, 'the typed line', /no-token-line/);
		check(page.requests.every((r) => r.headers.authorization === undefined), 'an Authorization header');
		facts.sessionStorage = await page.evaluate(() => sessionStorage.length);
	},

	// CSP: an injected inline script does not run; the page cannot be framed.
	async csp() {
		const page = await newPage();
		await open(page, '');
		await waitStatus(page, /^live/);
		const r = await page.evaluate(() => new Promise((resolve) => {
			const seen = [];
			document.addEventListener('securitypolicyviolation', (e) => seen.push(e.violatedDirective));
			window.inlineRan = false;
			const sc = document.createElement('script');
			sc.textContent = 'window.inlineRan = true';
			document.body.append(sc);
			setTimeout(() => resolve({ ran: window.inlineRan, seen }), 300);
		}));
		facts.inline = r;
		check(r.ran === false, 'an inline script ran');
		check(r.seen.some((d) => d.startsWith('script-src')), 'no violation reported');
		// Framed by a page of another origin (localhost vs 127.0.0.1).
		const other = BASE.replace('127.0.0.1', 'localhost');
		const framer = await newPage();
		await framer.goto(`${other}/term/`, { waitUntil: 'load' });
		const framed = await framer.evaluate((u) => new Promise((resolve) => {
			const f = document.createElement('iframe');
			f.src = u;
			f.onload = () => {
				let reachable;
				try { reachable = !!f.contentDocument?.getElementById('term'); } catch { reachable = false; }
				resolve(reachable);
			};
			document.body.append(f);
			setTimeout(() => resolve('no load'), 3000);
		}), `${BASE}/term/`);
		facts.framed = framed;
		const frames = framer.frames().map((f) => f.url());
		facts.frames = frames;
		const child = framer.frames().find((f) => f !== framer.mainFrame());
		const rendered = child ? await child.evaluate(() => !!document.getElementById('term')).catch(() => false) : false;
		check(!rendered, 'the page rendered inside a frame');
	},

	// Download recording (a blob of the fetched cast) and the replay.
	async cast() {
		const s = await create({ rows: 20, cols: 60, cmd:
		    "printf 'cast-one\\n'; sleep 0.3; printf 'cast-€-two\\n'; sleep 0.3; printf 'cast-three\\n'; sleep 30" });
		await waitFor('cast-three', async () => (await output(s.id)).includes('cast-three'));
		await api('POST', `/v1/sessions/${s.id}/resize`, { rows: 22, cols: 66 });
		const dir = fs.mkdtempSync(path.join(OUT, 'dl-'));
		const page = await newPage();
		const cdp = await page.createCDPSession();
		await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir });
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'cast-three', /cast-three/);
		await page.click('#download');
		const file = path.join(dir, `${s.id}.cast`);
		await waitFor('the download', async () => fs.existsSync(file) && fs.statSync(file).size > 0);
		facts.cast_file = file;
		facts.output = await output(s.id);
		const castReq = page.requests.find((r) => r.url.endsWith(`/${s.id}/cast`));
		check(castReq && castReq.headers.authorization === 'Bearer ' + TOKEN, 'the cast without the bearer header');
		// The replay: the terminal is reset, then the cast plays at its speed.
		// The screen's changes, timed in the page (by the rows xterm.js
		// draws: its screen reader rows follow them up to a second later).
		await page.evaluate(() => {
			const tree = document.querySelector('.xterm-rows');
			window.screenLog = [];
			new MutationObserver(() => {
				const t = tree.textContent;
				window.screenLog.push([performance.now(), t.includes('cast-one'), t.includes('cast-three')]);
			}).observe(tree, { subtree: true, childList: true, characterData: true });
		});
		await page.click('#replay');
		await waitStatus(page, /replaying/);
		await waitStatus(page, /^live/);
		const log = await page.evaluate(() => window.screenLog);
		const one = log.find(([, a, c]) => a && !c);
		check(one, 'the replay never showed its first line alone');
		const three = log.find(([t, , c]) => c && t > one[0]);
		check(three, 'the replay never showed its last line');
		facts.replay_ms = Math.round(three[0] - one[0]);
		check(facts.replay_ms >= 450 && facts.replay_ms < 3000, 'the replay took ' + facts.replay_ms + ' ms (0.6 s recorded)');
		await waitScreen(page, 'the session again', /cast-one[\s\S]*cast-three/);
	},

	// The screenshot for the docs: a shell with some colour.
	async screenshot() {
		const s = await create({ rows: 20, cols: 90, cmd:
		    "printf '\\033[1;32magent@sandbox\\033[0m:\\033[1;34m~/work\\033[0m$ make test\\n'; " +
		    "for t in ring pty proto sessions sse events; do printf '  \\033[32mok\\033[0m   %-10s %3d ms\\n' $t $((${#t} * 37)); done; " +
		    "printf '\\033[1mAll 6 suites passed.\\033[0m\\n\\033[1;32magent@sandbox\\033[0m:\\033[1;34m~/work\\033[0m$ '; sleep 60" });
		const page = await newPage(1000, 430);
		await open(page, `?session=${s.id}`);
		await waitScreen(page, 'the prompt', /All 6 suites passed/);
		await sleep(300);
		const file = path.join(OUT, 'web-terminal.png');
		await page.screenshot({ path: file });
		facts.screenshot = file;
	},
};

async function main() {
	const name = process.argv[2];
	const fn = scenarios[name];
	if (!fn) {
		console.error('usage: node web_test.mjs ' + Object.keys(scenarios).join('|'));
		process.exit(2);
	}
	const timer = setTimeout(() => {
		console.log(JSON.stringify({ ok: false, error: 'timeout', ...facts }));
		process.exit(1);
	}, 80000 * SLOW);
	let ok = true;
	try {
		await launch();
		await fn();
	} catch (e) {
		ok = false;
		facts.error = String(e && e.stack || e);
		// What each page showed, for the log.
		facts.pages = [];
		for (const [i, p] of pages.entries()) {
			try {
				await p.screenshot({ path: path.join(OUT, `failed-${name}-${i}.png`) });
				facts.pages.push({ url: p.url(), status: await status(p), screen: await screen(p),
				    errors: p.errors, requests: p.requests.slice(-20).map((r) => r.method + ' ' + r.url) });
			} catch (e2) {
				facts.pages.push({ error: String(e2) });
			}
		}
	}
	clearTimeout(timer);
	try {
		await browser?.close();
	} catch { /* gone already */ }
	fs.rmSync(userDir, { recursive: true, force: true });
	console.log(JSON.stringify({ ok, ...facts }));
	process.exit(ok ? 0 : 1);
}

main();
