#!/bin/bash
# web/build.sh SRC OUT -- the web terminal's page into OUT: index.html,
# app.js, style.css and xterm.js's files from SRC/node_modules (npm ci in
# SRC, by build-aux/deps.sh or here when they are missing).
set -euo pipefail
src=$1
out=$2
xterm=$src/node_modules/@xterm/xterm
fit=$src/node_modules/@xterm/addon-fit
if [ ! -f "$xterm/lib/xterm.js" ] || [ ! -f "$fit/lib/addon-fit.js" ] ||
    [ "$src/package-lock.json" -nt "$src/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || { echo "web/build.sh: npm not found (needed for xterm.js)" >&2; exit 1; }
	(cd "$src" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
# Each file replaced by a rename, in place: an agentd serving OUT (make run)
# keeps its folder and never sees half a file.
mkdir -p "$out"
for f in "$src/index.html" "$src/app.js" "$src/style.css" "$xterm/lib/xterm.js" \
    "$xterm/css/xterm.css" "$fit/lib/addon-fit.js"; do
	b=$(basename "$f")
	cp "$f" "$out/.$b.tmp"
	chmod 0644 "$out/.$b.tmp"
	mv -f "$out/.$b.tmp" "$out/$b"
done
