// A real SSE client (the npm package eventsource, which reconnects by itself
// with Last-Event-ID) against agentd.  Usage:
//   node es_client.mjs URL TOKEN session   follow a session's stream: its
//       output, its exit, the reconnect after the stream ended and the exit
//       again (resumed after the last id: no output twice); prints JSON
//   node es_client.mjs URL TOKEN events N  the first N events of a stream
// Exits 0 after printing one JSON line, 1 on an error or after 60 s.
const here = new URL('.', import.meta.url);
const { EventSource } = await import(
  new URL('../node/node_modules/eventsource/dist/index.js', here));

const [url, token, mode, count] = process.argv.slice(2);
const auth = (input, init) => fetch(input, {
  ...init,
  headers: { ...init.headers, Authorization: 'Bearer ' + token },
});
const es = new EventSource(url, { fetch: auth });
const out = { output: '', ids: [], exits: 0, opens: 0, events: [], gaps: 0 };
const done = (code) => {
  es.close();
  console.log(JSON.stringify(out));
  process.exit(code);
};
setTimeout(() => { out.error = 'timeout'; done(1); }, 60000);
es.onopen = () => { out.opens++; };
es.onerror = (e) => {
  if (e && e.code !== undefined && e.code >= 400) {
    out.error = 'http ' + e.code;
    done(1);
  }
};
if (mode === 'session') {
  es.addEventListener('output', (ev) => {
    const c = JSON.parse(ev.data);
    if (String(c.id) !== ev.lastEventId) {
      out.error = 'id ' + ev.lastEventId + ' != chunk ' + c.id;
      done(1);
    }
    out.ids.push(c.id);
    out.output += Buffer.from(c.data, 'base64').toString('latin1');
  });
  es.addEventListener('gap', () => { out.gaps++; });
  es.addEventListener('exit', (ev) => {
    out.exits++;
    out.session = JSON.parse(ev.data);
    if (out.exits === 2)
      done(0);
  });
} else {
  const want = Number(count);
  es.onmessage = () => {};
  const seen = (ev) => {
    out.events.push(JSON.parse(ev.data));
    out.ids.push(Number(ev.lastEventId));
    if (out.events.length >= want)
      done(0);
  };
  for (const t of ['session.created', 'session.exited', 'session.removed'])
    es.addEventListener(t, seen);
}
