// bench/envd.mjs URL_ENVD URL_API TOKEN N: scenario 12's client (bench/envd.py
// runs it).  The E2B SDK's commands.run('true') through --envd-listen (it
// runs /bin/bash -l -c true), against agentd's own create of the same argv
// (POST /v1/sessions, yield_ms; the DELETE after it is not timed), in
// alternating batches; prints one JSON line of the samples in ms.
import { Sandbox } from 'e2b';

const [envdUrl, apiUrl, token, n] = process.argv.slice(2);
const rounds = Number(n);
const batch = 5;
const sbx = new Sandbox({ sandboxId: 'bench', envdVersion: '99.99.99',
    debug: true, sandboxUrl: envdUrl, envdAccessToken: token });
const auth = { Authorization: 'Bearer ' + token };

async function sdkOnce() {
	const t0 = performance.now();
	const r = await sbx.commands.run('true');
	const t = performance.now() - t0;
	if (r.exitCode !== 0)
		throw new Error('commands.run: exit ' + r.exitCode);
	return t;
}

async function createOnce() {
	const t0 = performance.now();
	const res = await fetch(apiUrl + '/v1/sessions', { method: 'POST',
	    headers: { ...auth, 'Content-Type': 'application/json' },
	    body: JSON.stringify({ argv: ['/bin/bash', '-l', '-c', 'true'],
		yield_ms: 10000, max_bytes: 65536 }) });
	const j = await res.json();
	const t = performance.now() - t0;
	if (res.status !== 201 && res.status !== 200 || j.exit_code !== 0)
		throw new Error('create: ' + res.status + ' ' + JSON.stringify(j));
	await (await fetch(apiUrl + '/v1/sessions/' + j.id,
	    { method: 'DELETE', headers: auth })).text();
	return t;
}

const sdk = [], create = [];
await sdkOnce();	// warm both paths up
await createOnce();
for (let i = 0; i < rounds; i += batch) {
	for (let k = 0; k < batch; k++)
		sdk.push(await sdkOnce());
	for (let k = 0; k < batch; k++)
		create.push(await createOnce());
}
console.log(JSON.stringify({ sdk, create }));
