// agentd's web terminal (docs/web.md): the session list at /term/, one
// session at /term/?session=ID (&view=1: view only). A client of the public
// API (API.md) like any other; session output only ever reaches the DOM
// through xterm.js or textContent, never as HTML.

const TOKEN_KEY = 'agentd.token';
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 3000;
const POLL_MS = 1500;
const STDIN_BATCH_MAX = 65536;
// The first write after this long without one of ours looks stdin_bytes up
// first: another client may have written meanwhile, and a write at an old
// offset reads as a duplicate (then it is sent again at the new one, but
// not when its answer is lost too).
const STDIN_FRESH_MS = 1000;
const DEFAULT_RING_BYTES = 1 << 20;
// A login shell of agentd's user: its shell from /etc/passwd, else /bin/sh.
const LOGIN_SHELL =
	's=$(awk -F: -v u="$(id -u)" \'$3 == u { print $7; exit }\' /etc/passwd 2>/dev/null); ' +
	'case "$s" in ""|*nologin|*false) s=/bin/sh ;; esac; exec "$s" -l';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const enc = new TextEncoder();

class AuthError extends Error {}
class ApiError extends Error {
	constructor(status, body) {
		super(body?.error?.message || `HTTP ${status}`);
		this.status = status;
		this.body = body;
		this.code = body?.error?.code;
	}
}

// The token: from the URL's fragment (then removed from the address bar),
// else sessionStorage; never localStorage, never a cookie.
function tokenInit() {
	const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
	if (!m)
		return;
	const t = decodeURIComponent(m[1]);
	if (t)
		sessionStorage.setItem(TOKEN_KEY, t);
	history.replaceState(history.state, '', location.pathname + location.search);
}

function tokenGet() {
	return sessionStorage.getItem(TOKEN_KEY) || '';
}

// fetch() with the token as Authorization: Bearer, and nothing else of it.
async function apiFetch(path, opts = {}) {
	const headers = new Headers(opts.headers || {});
	const t = tokenGet();
	if (t)
		headers.set('Authorization', 'Bearer ' + t);
	let body = opts.body;
	if (opts.json !== undefined) {
		headers.set('Content-Type', 'application/json');
		body = JSON.stringify(opts.json);
	}
	const r = await fetch(path, {
		method: opts.method || 'GET', headers, body, signal: opts.signal,
		cache: 'no-store', credentials: 'omit', redirect: 'error',
	});
	if (r.status === 401)
		throw new AuthError('unauthorized');
	if (!r.ok) {
		let j = null;
		try { j = await r.json(); } catch { /* not JSON */ }
		throw new ApiError(r.status, j);
	}
	return r;
}

async function apiJson(path, opts) {
	return (await apiFetch(path, opts)).json();
}

// Reads a Server-Sent Events answer from fetch(): EventSource cannot send
// the Authorization header.  Calls onEvent(type, data, id) per event.
async function sseRead(path, lastId, onEvent, signal, onOpen) {
	const headers = { Accept: 'text/event-stream' };
	if (lastId !== null && lastId !== undefined)
		headers['Last-Event-ID'] = String(lastId);
	const r = await apiFetch(path, { headers, signal });
	onOpen?.();
	const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
	let buf = '', type = '', data = [], id = null;
	for (;;) {
		const { value, done } = await reader.read();
		if (done)
			return;
		buf += value;
		let i;
		while ((i = buf.indexOf('\n')) >= 0) {
			let line = buf.slice(0, i);
			buf = buf.slice(i + 1);
			if (line.endsWith('\r'))
				line = line.slice(0, -1);
			if (line === '') {
				if (data.length)
					onEvent(type || 'message', data.join('\n'), id);
				type = '';
				data = [];
				continue;
			}
			if (line[0] === ':')
				continue;
			const c = line.indexOf(':');
			const field = c < 0 ? line : line.slice(0, c);
			let v = c < 0 ? '' : line.slice(c + 1);
			if (v[0] === ' ')
				v = v.slice(1);
			if (field === 'event')
				type = v;
			else if (field === 'data')
				data.push(v);
			else if (field === 'id')
				id = v;
		}
	}
}

function b64decode(s) {
	const bin = atob(s);
	const a = new Uint8Array(bin.length);
	for (let i = 0; i < bin.length; i++)
		a[i] = bin.charCodeAt(i);
	return a;
}

function b64encode(bytes) {
	let s = '';
	for (let i = 0; i < bytes.length; i += 0x8000)
		s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
	return btoa(s);
}

function sleep(ms, signal) {
	return new Promise((resolve) => {
		const t = setTimeout(resolve, ms);
		signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); });
	});
}

function setStatus(text, cls) {
	const s = $('status');
	s.textContent = text;
	s.className = cls || '';
}

function showError(text) {
	const e = $('error');
	e.textContent = text;
	e.hidden = !text;
}

// A 401: nothing of the sessions stays on the page; ask for the token.
function showUnauthorized() {
	const had = tokenGet() !== '';
	sessionStorage.removeItem(TOKEN_KEY);
	for (const id of ['sessions', 'term', 'download', 'replay', 'newshell'])
		$(id).hidden = true;
	$('sessions').tBodies[0].replaceChildren();
	$('term').replaceChildren();
	$('title').textContent = '';
	$('size').textContent = '';
	setStatus('');
	showError(had ? 'unauthorized: the token was refused' :
	    'unauthorized: this agentd needs a token');
	$('tokenform').hidden = false;
	$('token').focus();
}

function fatal(err) {
	if (err instanceof AuthError) {
		stopAll();
		showUnauthorized();
		return true;
	}
	return false;
}

let stopController = new AbortController();

function stopAll() {
	stopController.abort();
	stopController = new AbortController();
}

// ---- the session list ------------------------------------------------------

function sessionState(s) {
	if (s.state !== 'exited')
		return s.state;
	if (s.signal)
		return `exited (${s.signal})`;
	return `exited (${s.exit_code})`;
}

function td(text, cls) {
	const c = document.createElement('td');
	c.textContent = text;
	if (cls)
		c.className = cls;
	return c;
}

function listRender(sessions) {
	const rows = sessions.map((s) => {
		const tr = document.createElement('tr');
		const id = document.createElement('td');
		const a = document.createElement('a');
		a.href = '?session=' + encodeURIComponent(s.id);
		a.textContent = s.id;
		id.append(a);
		const labels = Object.entries(s.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ');
		tr.append(id, td((s.argv || []).join(' '), 'cmd'), td(sessionState(s)),
		    td(labels), td(s.started_at || ''));
		tr.dataset.session = s.id;
		return tr;
	});
	$('sessions').tBodies[0].replaceChildren(...rows);
}

async function listLoad(signal) {
	const j = await apiJson('/v1/sessions', { signal });
	listRender(j.sessions);
}

// The list, kept live by the event feed's stream (each event reloads it).
async function listPage() {
	const signal = stopController.signal;
	$('title').textContent = 'sessions';
	$('newshell').hidden = false;
	$('sessions').hidden = false;
	let lastId = null;
	let retry = RETRY_MIN_MS;
	let pending = null;
	const reload = () => {
		if (pending)
			return;
		pending = setTimeout(() => {
			pending = null;
			listLoad(signal).catch((e) => fatal(e));
		}, 50);
	};
	while (!signal.aborted) {
		try {
			await listLoad(signal);
			retry = RETRY_MIN_MS;
			await sseRead('/v1/events', lastId, (type, data, id) => {
				lastId = id;
				reload();
			}, signal, () => setStatus('live'));
		} catch (e) {
			if (fatal(e) || signal.aborted)
				return;
			if (e instanceof ApiError && e.code === 'invalid_cursor')
				lastId = null;
		}
		if (signal.aborted)
			return;
		setStatus('reconnecting…', 'warn');
		await sleep(retry, signal);
		retry = Math.min(retry * 2, RETRY_MAX_MS);
	}
}

async function newShell() {
	const dims = fitGuess();
	try {
		const s = await apiJson('/v1/sessions', { method: 'POST', json: {
			cmd: LOGIN_SHELL, tty: true, rows: dims.rows, cols: dims.cols,
		} });
		location.assign('?session=' + encodeURIComponent(s.id));
	} catch (e) {
		if (!fatal(e))
			showError('New shell: ' + e.message);
	}
}

// The size a terminal in #term would have: for the new shell's first size.
function fitGuess() {
	const el = $('term');
	const hid = el.hidden;
	el.hidden = false;
	const t = new Terminal({ fontSize: 14 });
	const f = new FitAddon.FitAddon();
	t.loadAddon(f);
	t.open(el);
	const d = f.proposeDimensions();
	t.dispose();
	el.hidden = hid;
	el.replaceChildren();
	if (!d || !(d.cols > 0) || !(d.rows > 0))
		return { cols: 80, rows: 24 };
	return { cols: Math.min(d.cols, 65535), rows: Math.min(d.rows, 65535) };
}

// ---- one session ---------------------------------------------------------

class SessionView {
	constructor(id, view) {
		this.id = id;
		this.view = view;
		this.path = '/v1/sessions/' + encodeURIComponent(id);
		this.signal = stopController.signal;
		this.session = null;
		this.cursor = 0;          // the last chunk shown (its id)
		this.nextOffset = 0;      // the output offset after it
		this.exited = false;
		this.replaying = false;
		this.live = null;         // AbortController of the output stream
		this.stdinQueue = [];     // Uint8Arrays typed, not yet sent
		this.stdinSending = false;
		this.stdinBytes = 0;      // stdin bytes agentd has accepted, as known
		this.stdinKnownAt = 0;    // when our last write was answered
		this.wake = new AbortController();   // ends a reconnect's wait
		this.replayCtl = null;
	}

	async start() {
		$('title').textContent = this.id + (this.view ? ' (view only)' : '');
		this.session = await apiJson(this.path + '?max_bytes=1', { signal: this.signal });
		const s = this.session;
		this.stdinBytes = s.stdin_bytes || 0;
		this.tty = !!s.tty;
		this.driving = !this.view && this.tty && s.state !== 'exited';
		const el = $('term');
		el.hidden = false;
		$('download').hidden = false;
		$('replay').hidden = false;
		const lines = Math.ceil(Math.max(DEFAULT_RING_BYTES, s.bytes_out || 0) / 2) + 100;
		this.term = new Terminal({
			screenReaderMode: true,
			scrollback: Math.min(lines, 1 << 24),
			convertEol: !this.tty,
			disableStdin: this.view,
			cursorBlink: !this.view,
			fontSize: 14,
			cols: s.cols || 80,
			rows: s.rows || 24,
		});
		this.fit = new FitAddon.FitAddon();
		this.term.loadAddon(this.fit);
		this.term.open(el);
		this.showSize();
		if (this.tty)
			this.term.resize(s.cols, s.rows);
		else
			this.fitLocal();
		if (!this.view) {
			this.term.onData((d) => this.type(enc.encode(d)));
			this.term.onBinary((d) => this.type(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)));
			this.term.focus();
		}
		this.term.onResize(() => this.showSize());
		let resizeTimer = null;
		window.addEventListener('resize', () => {
			clearTimeout(resizeTimer);
			resizeTimer = setTimeout(() => this.onWindowResize(), 100);
		});
		// Offline: drop the stream now; online: reconnect now.
		window.addEventListener('offline', () => this.live?.abort());
		window.addEventListener('online', () => this.wake.abort());
		if (this.driving)
			await this.claimSize();
		this.pollSize();
		this.follow();
	}

	showSize() {
		$('size').textContent = `${this.term.cols}x${this.term.rows}`;
	}

	// A pipe session (or a replay) has no PTY size: fit the window.
	fitLocal() {
		const d = this.fit.proposeDimensions();
		if (d && d.cols > 0 && d.rows > 0)
			this.term.resize(d.cols, d.rows);
	}

	onWindowResize() {
		if (this.replaying)
			return;
		if (!this.tty)
			this.fitLocal();
		else if (this.driving && !this.exited)
			this.claimSize().catch((e) => fatal(e));
	}

	// The driving page resizes the PTY to its own size; the last one wins.
	async claimSize() {
		const d = this.fit.proposeDimensions();
		if (!d || !(d.cols > 0) || !(d.rows > 0))
			return;
		const want = { cols: Math.min(d.cols, 65535), rows: Math.min(d.rows, 65535) };
		try {
			const s = await apiJson(this.path + '/resize', { method: 'POST', json: want, signal: this.signal });
			this.sessionSeen(s);
		} catch (e) {
			if (e instanceof ApiError && (e.code === 'session_exited' || e.code === 'not_a_tty'))
				return;
			throw e;
		}
	}

	// Every page shows the PTY at its size: follow resizes made elsewhere.
	sessionSeen(s) {
		if (!s || s.id !== this.id)
			return;
		this.session = s;
		if (typeof s.stdin_bytes === 'number' && !this.stdinSending)
			this.stdinBytes = Math.max(this.stdinBytes, s.stdin_bytes);
		if (this.tty && !this.replaying && (s.cols !== this.term.cols || s.rows !== this.term.rows))
			this.term.resize(s.cols, s.rows);
	}

	async pollSize() {
		while (!this.signal.aborted && !this.exited) {
			await sleep(POLL_MS, this.signal);
			if (this.signal.aborted || this.exited)
				return;
			try {
				const c = Math.max(this.cursor, this.session.last_chunk || 0);
				const s = await apiJson(`${this.path}?cursor=${c}&max_bytes=1`, { signal: this.signal });
				this.sessionSeen(s);
			} catch (e) {
				if (fatal(e))
					return;
			}
		}
	}

	// Output: the ring's chunks after the cursor, then live, by SSE; on a
	// lost connection again from the cursor, so every byte comes once.
	async follow() {
		let retry = RETRY_MIN_MS;
		setStatus('connecting…');
		while (!this.signal.aborted && !this.exited && !this.replaying) {
			const live = new AbortController();
			this.live = live;
			const stop = () => live.abort();
			this.signal.addEventListener('abort', stop);
			try {
				await sseRead(this.path + '?cursor=' + this.cursor, null, (type, data) => {
					if (live.signal.aborted)
						return;
					retry = RETRY_MIN_MS;
					this.onEvent(type, data);
				}, live.signal, () => {
					if (!this.exited)
						setStatus(this.view ? 'live (view only)' : 'live');
				});
			} catch (e) {
				if (fatal(e))
					return;
				if (e instanceof ApiError && e.status === 404) {
					this.exited = true;
					setStatus('session removed', 'bad');
					return;
				}
			} finally {
				this.signal.removeEventListener('abort', stop);
			}
			if (this.signal.aborted || this.exited || this.replaying)
				return;
			setStatus('reconnecting…', 'warn');
			if (this.wake.signal.aborted)
				this.wake = new AbortController();
			await sleep(retry, AbortSignal.any([this.signal, this.wake.signal]));
			retry = Math.min(retry * 2, RETRY_MAX_MS);
		}
	}

	onEvent(type, data) {
		const j = JSON.parse(data);
		if (type === 'output') {
			if (j.id <= this.cursor)
				return;
			if (j.offset > this.nextOffset)
				this.gap(j.offset - this.nextOffset);
			const bytes = j.data !== undefined ? b64decode(j.data) : enc.encode(j.text);
			this.term.write(bytes);
			this.cursor = j.id;
			this.nextOffset = j.offset + bytes.length;
			if ($('status').textContent !== 'live')
				setStatus(this.view ? 'live (view only)' : 'live');
		} else if (type === 'exit') {
			this.sessionSeen(j);
			this.exited = true;
			this.driving = false;
			const how = j.signal ? `killed by ${j.signal}, exit code ${j.exit_code}` :
			    `exit code ${j.exit_code}`;
			setStatus(`exited: ${how}`, j.exit_code === 0 ? '' : 'bad');
			this.live?.abort();
		}
	}

	// Output the ring evicted before this page read it: a marked line.
	gap(bytes) {
		const nl = this.nextOffset > 0 ? '\r\n' : '';
		this.term.write(`${nl}\x1b[7m[agentd: ${bytes} bytes of output evicted from the ring]\x1b[0m\r\n`);
	}

	// Keystrokes, pastes: queued, sent in order, each byte once (stdin offsets).
	type(bytes) {
		if (!this.driving || this.exited || this.replaying)
			return;
		this.stdinQueue.push(bytes);
		if (!this.stdinSending)
			this.stdinPump();
	}

	async stdinPump() {
		this.stdinSending = true;
		try {
			while (this.stdinQueue.length && !this.signal.aborted) {
				let n = 0, k = 0;
				while (k < this.stdinQueue.length && (k === 0 || n + this.stdinQueue[k].length <= STDIN_BATCH_MAX))
					n += this.stdinQueue[k++].length;
				const batch = new Uint8Array(n);
				let o = 0;
				for (const b of this.stdinQueue.splice(0, k)) {
					batch.set(b, o);
					o += b.length;
				}
				if (!await this.stdinSend(batch))
					return;
			}
		} finally {
			this.stdinSending = false;
		}
	}

	// One batch: retried with the same offset until agentd answers (so a
	// retry of a write that arrived is a duplicate, not written twice).
	async stdinSend(batch) {
		let first = true;
		let retry = RETRY_MIN_MS;
		for (;;) {
			try {
				if (first && performance.now() - this.stdinKnownAt > STDIN_FRESH_MS) {
					const s = await apiJson(`${this.path}?cursor=${this.cursor}&max_bytes=1`, { signal: this.signal });
					this.stdinBytes = Math.max(this.stdinBytes, s.stdin_bytes || 0);
				}
				const offset = this.stdinBytes;
				const r = await apiJson(this.path + '/stdin', { method: 'POST', signal: this.signal,
				    json: { data: b64encode(batch), offset, max_bytes: 1 } });
				const accepted = r.stdin_bytes;
				if (first && (r.duplicate || r.written < batch.length) && accepted > offset) {
					// Another page wrote meanwhile: our offset was old, and
					// the bytes it took for ours were theirs.
					const lost = r.duplicate ? batch : batch.subarray(0, batch.length - r.written);
					this.stdinBytes = accepted;
					batch = lost.slice();
					continue;
				}
				this.stdinBytes = Math.max(offset + batch.length, accepted || 0);
				this.stdinKnownAt = performance.now();
				return true;
			} catch (e) {
				if (fatal(e) || this.signal.aborted)
					return false;
				if (e instanceof ApiError) {
					if (e.code === 'stdin_offset_mismatch') {
						this.stdinBytes = e.body.error.stdin_bytes;
						continue;
					}
					if (e.code === 'session_exited' || e.code === 'stdin_closed' || e.status === 404) {
						this.stdinQueue = [];
						return false;
					}
				}
				// A lost connection: send the same bytes at the same offset.
				first = false;
				await sleep(retry, this.signal);
				retry = Math.min(retry * 2, RETRY_MAX_MS);
			}
		}
	}

	async castFetch() {
		const r = await apiFetch(this.path + '/cast', { signal: this.signal });
		return r.text();
	}

	// The recording: fetched with the token, handed over as a blob URL.
	async download() {
		const text = await this.castFetch();
		const url = URL.createObjectURL(new Blob([text], { type: 'application/x-asciicast' }));
		const a = document.createElement('a');
		a.href = url;
		a.download = this.id + '.cast';
		document.body.append(a);
		a.click();
		a.remove();
		setTimeout(() => URL.revokeObjectURL(url), 10000);
	}

	// Replays the recording in this terminal at its speed, then attaches again.
	async replay() {
		if (this.replaying)
			return;
		const text = await this.castFetch();
		const lines = text.split('\n').filter((l) => l !== '');
		const head = JSON.parse(lines.shift());
		this.replaying = true;
		this.replayCtl = new AbortController();
		const rsig = AbortSignal.any([this.signal, this.replayCtl.signal]);
		this.live?.abort();
		const btn = $('replay');
		btn.textContent = 'Stop replay';
		const prevStatus = [$('status').textContent, $('status').className];
		setStatus('replaying', 'warn');
		this.term.reset();
		this.term.resize(head.width || 80, head.height || 24);
		const start = performance.now();
		for (const l of lines) {
			if (!this.replaying || this.signal.aborted)
				break;
			const [t, kind, data] = JSON.parse(l);
			const wait = start + t * 1000 - performance.now();
			if (wait > 0)
				await sleep(wait, rsig);
			if (!this.replaying)
				break;
			if (kind === 'o')
				this.term.write(data);
			else if (kind === 'r') {
				const m = /^(\d+)x(\d+)$/.exec(data);
				if (m)
					this.term.resize(+m[1], +m[2]);
			} else if (kind === 'm')
				this.term.write(`\r\n\x1b[7m[${data}]\x1b[0m\r\n`);
		}
		const done = this.replaying;
		this.replaying = false;
		btn.textContent = 'Replay';
		if (done)
			this.term.write('\r\n\x1b[7m[end of the replay: back to the session in 1 s]\x1b[0m\r\n');
		await sleep(done ? 1000 : 0, this.signal);
		// Attach again from the start of the ring.
		this.term.reset();
		this.cursor = 0;
		this.nextOffset = 0;
		if (this.session)
			this.sessionSeen(this.session);
		if (!this.tty)
			this.fitLocal();
		setStatus(...prevStatus);
		if (!this.exited)
			this.follow();
		else
			this.replayExited();
	}

	// An exited session read once more, whole (its stream ends at once).
	async replayExited() {
		this.exited = false;
		await this.follow();
		this.exited = true;
	}
}

// ---- start -----------------------------------------------------------------

let current = null;   // the SessionView shown

// Shows the list or one session; again after a new token.
async function main() {
	showError('');
	$('tokenform').hidden = true;
	current?.term?.dispose();
	current = null;
	$('term').replaceChildren();
	const id = params.get('session');
	try {
		if (id) {
			const v = new SessionView(id, params.get('view') === '1');
			current = v;
			$('download').onclick = (ev) => {
				ev.preventDefault();
				v.download().catch((e) => fatal(e) || showError('Download: ' + e.message));
			};
			$('replay').onclick = () => {
				if (v.replaying) {
					v.replaying = false;
					v.replayCtl?.abort();
				} else {
					v.replay().catch((e) => fatal(e) || showError('Replay: ' + e.message));
				}
			};
			await v.start();
		} else {
			await listPage();
		}
	} catch (e) {
		if (fatal(e))
			return;
		if (e instanceof ApiError && e.status === 404)
			showError(`no session '${id}'`);
		else if (e.name !== 'AbortError')
			showError(e.message);
	}
}

tokenInit();
// A token put into the address bar of an open page: take it, start again.
window.addEventListener('hashchange', () => {
	if (!/(?:^#|&)token=/.test(location.hash))
		return;
	tokenInit();
	stopAll();
	main();
});
$('newshell').addEventListener('click', newShell);
$('tokenform').addEventListener('submit', (ev) => {
	ev.preventDefault();
	const t = $('token').value.trim();
	$('token').value = '';
	if (t)
		sessionStorage.setItem(TOKEN_KEY, t);
	stopAll();
	main();
});
main();
