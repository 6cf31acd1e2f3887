#!/bin/bash
# bench/run.sh [--quick] [--only 1,2,...] [--no-deps] [--outdir DIR]
#
# What `make bench` runs: installs the bench packages (build-aux/deps.sh
# bench), builds the dev build (build/) and the static release build
# (build-static/), starts the baselines' servers privately -- an sshd on
# 127.0.0.1 on a free port with throwaway host and user keys and a
# ControlMaster, and a tmux server on its own socket -- then runs
# agentd-bench, which prints one table, and plots it with gnuplot.
# Everything it started (sshd, the ssh master, tmux, every agentd) is
# stopped, and the temporary directory removed, however it ends.
#
#   --quick    every scenario tiny (< 60 s): the smoke test of `make test`;
#              results go to a temporary directory, numbers are not judged
#   --only L   only these scenarios (numbers of the issue, e.g. 1,2,9;
#              11 is containment in the qemu VM, bench/contain.py, skipped
#              without qemu; 12 the E2B SDK through --envd-listen,
#              bench/envd.py, skipped without node)
#   --no-deps  do not install packages (what is missing is skipped)
#   --outdir D where bench.md, bench.tsv and bench.png go
#              (default bench/results, or a temporary one with --quick)
#
# Environment: BUILD_DIR (default build), STATIC_BIN (default
# build-static/agentd/agentd; built by build-aux/static.sh unless given).
set -euo pipefail

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
cd "$root"

quick=0
only=
deps=1
outdir=
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--only) only=$2; shift ;;
	--no-deps) deps=0 ;;
	--outdir) outdir=$2; shift ;;
	-h|--help) sed -n '2,25p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

log() { printf 'bench: %s\n' "$*" >&2; }

# ---- packages and builds ----------------------------------------------------
if [ "$deps" = 1 ]; then
	if ! build-aux/deps.sh build bench; then
		[ "$quick" = 1 ] || exit 1
		log "warning: could not install the bench packages; missing baselines are skipped"
	fi
fi

BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
	meson setup "$BUILD_DIR" >/dev/null
fi
meson compile -C "$BUILD_DIR" >/dev/null || meson compile -C "$BUILD_DIR"
dev_bin=$BUILD_DIR/agentd/agentd
client=$BUILD_DIR/bench/agentd-bench
ring_bench=$BUILD_DIR/bench/ring_bench

if [ -z "${STATIC_BIN:-}" ]; then
	STATIC_BIN=build-static/agentd/agentd
	if ! build-aux/static.sh build >&2; then
		[ "$quick" = 1 ] || { log "the static build failed"; exit 1; }
		log "warning: no static build; measuring the dev build alone"
		STATIC_BIN=$dev_bin
	fi
fi
[ -x "$STATIC_BIN" ] || { log "no agentd binary at $STATIC_BIN"; exit 1; }

# ---- a private world, removed at the end ------------------------------------
tmp=$(mktemp -d /tmp/agentd-bench.XXXXXX)
sshd_pid=
made_privsep=
ssh_cfg=
tmux_sock=$tmp/tmux.sock

cleanup() {
	set +e
	if [ -f "$tmp/agentd.pids" ]; then
		while read -r pid; do
			[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
		done <"$tmp/agentd.pids"
	fi
	if [ -n "$ssh_cfg" ]; then
		ssh -F "$ssh_cfg" -O exit bench >/dev/null 2>&1
	fi
	if [ -n "$sshd_pid" ]; then
		kill "$sshd_pid" 2>/dev/null
		wait "$sshd_pid" 2>/dev/null
	fi
	[ -n "$made_privsep" ] && rmdir /run/sshd 2>/dev/null
	tmux -S "$tmux_sock" kill-server >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# sshd on loopback with a throwaway host key, a throwaway user key, and a
# ControlMaster the client reuses (ssh host CMD then costs one channel).
start_sshd() {
	local port sshd user
	sshd=$(command -v sshd || echo /usr/sbin/sshd)
	[ -x "$sshd" ] && command -v ssh >/dev/null || return 1
	port=$(free_port)
	user=$(id -un)
	mkdir -p "$tmp/home"
	ssh-keygen -q -t ed25519 -N '' -C agentd-bench -f "$tmp/host_key"
	ssh-keygen -q -t ed25519 -N '' -C agentd-bench -f "$tmp/user_key"
	cp "$tmp/user_key.pub" "$tmp/authorized_keys"
	echo "[127.0.0.1]:$port $(cat "$tmp/host_key.pub")" >"$tmp/known_hosts"
	cat >"$tmp/sshd_config" <<-EOF
	Port $port
	ListenAddress 127.0.0.1
	HostKey $tmp/host_key
	PidFile $tmp/sshd.pid
	AuthorizedKeysFile $tmp/authorized_keys
	PubkeyAuthentication yes
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	PermitRootLogin prohibit-password
	AllowUsers $user
	UsePAM no
	StrictModes no
	PrintMotd no
	PrintLastLog no
	UseDNS no
	MaxSessions 64
	LogLevel ERROR
	# A clean HOME: the user's own rc files (bash reads ~/.bashrc under
	# sshd) are not ssh's cost, and a fresh machine has none to speak of.
	SetEnv HOME=$tmp/home
	EOF
	cat >"$tmp/ssh_config" <<-EOF
	Host bench
		HostName 127.0.0.1
		Port $port
		User $user
		IdentityFile $tmp/user_key
		IdentitiesOnly yes
		UserKnownHostsFile $tmp/known_hosts
		StrictHostKeyChecking yes
		BatchMode yes
		ControlMaster auto
		ControlPath $tmp/cm-%C
		ControlPersist yes
		LogLevel ERROR
	EOF
	if [ ! -d /run/sshd ]; then
		mkdir -p /run/sshd && chmod 0755 /run/sshd && made_privsep=1
	fi
	"$sshd" -D -e -f "$tmp/sshd_config" 2>>"$tmp/sshd.log" &
	sshd_pid=$!
	ssh_cfg=$tmp/ssh_config
	for _ in $(seq 100); do
		if ssh -F "$ssh_cfg" bench true </dev/null 2>/dev/null; then
			return 0
		fi
		kill -0 "$sshd_pid" 2>/dev/null || break
		sleep 0.05
	done
	log "warning: sshd did not come up: $(tail -3 "$tmp/sshd.log" 2>/dev/null)"
	return 1
}

ssh_args=()
if start_sshd; then
	ssh_args=(--ssh-config "$ssh_cfg" --ssh-host bench)
else
	log "warning: no ssh baseline"
	ssh_cfg=
fi

tmux_args=()
# The window's shell (send-keys) is the user's, with a clean HOME as for ssh.
mkdir -p "$tmp/home"
if command -v tmux >/dev/null &&
	HOME=$tmp/home tmux -S "$tmux_sock" -f /dev/null new-session -d -s bench -x 80 -y 24; then
	tmux_args=(--tmux-socket "$tmux_sock")
else
	log "warning: no tmux baseline"
fi

# ---- run ------------------------------------------------------------------------
if [ -z "$outdir" ]; then
	if [ "$quick" = 1 ]; then outdir=$tmp/results; else outdir=$here/results; fi
fi
mkdir -p "$outdir"

model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
when=$(date -u '+%Y-%m-%d %H:%M UTC')
header="Measured $when on ${model:-unknown CPU} ($(nproc) cores, $(uname -r), loopback), by \`make bench\`; agentd $(git describe --always --dirty 2>/dev/null || echo '?'), release binary $STATIC_BIN."
log "$header"

args=(--agentd "$STATIC_BIN" --agentd-dev "$dev_bin" --ring-bench "$ring_bench"
	--tmpdir "$tmp" --outdir "$outdir" --header "$header"
	${ssh_args[@]+"${ssh_args[@]}"} ${tmux_args[@]+"${tmux_args[@]}"})
[ "$quick" = 1 ] && args+=(--quick)
[ -n "$only" ] && args+=(--only "$only")
# Scenarios 11 and 12 are bench/contain.py's and bench/envd.py's alone (the
# client reads "11" as 1).
[ "$only" = 11 ] || [ "$only" = 12 ] || "$client" "${args[@]}"

# ---- scenario 11: containment, in the VM (bench/contain.py) -----------------
if [ -z "$only" ] || [[ ",$only," == *,11,* ]]; then
	cargs=(--outdir "$outdir")
	[ "$quick" = 1 ] && cargs+=(--quick)
	rc=0
	STATIC_BIN=$STATIC_BIN python3 "$here/contain.py" "${cargs[@]}" || rc=$?
	case $rc in
	0) [ -f "$outdir/bench.md" ] && { echo; cat "$outdir/contain.md"; } >>"$outdir/bench.md" ;;
	77) log "scenario 11 skipped (no qemu, kernel or static build)" ;;
	*) log "scenario 11 failed ($rc)"; exit 1 ;;
	esac
fi

# ---- scenario 12: the E2B SDK through --envd-listen (bench/envd.py) ---------
if [ -z "$only" ] || [[ ",$only," == *,12,* ]]; then
	eargs=(--outdir "$outdir")
	[ "$quick" = 1 ] && eargs+=(--quick)
	rc=0
	STATIC_BIN=$STATIC_BIN python3 "$here/envd.py" "${eargs[@]}" || rc=$?
	case $rc in
	0) [ -f "$outdir/bench.md" ] && { echo; cat "$outdir/envd.md"; } >>"$outdir/bench.md" ;;
	77) log "scenario 12 skipped (no node, tests/node e2b or binary)" ;;
	*) log "scenario 12 failed ($rc)"; exit 1 ;;
	esac
fi

if command -v gnuplot >/dev/null; then
	ngoals=$(grep -c . "$outdir/goals.dat" 2>/dev/null || true)
	nlat=$(grep -c . "$outdir/latency.dat" 2>/dev/null || true)
	if gnuplot -e "outdir='$outdir'; when='$when'; model='${model:-}'; ngoals=${ngoals:-0}; nlat=${nlat:-0}" \
		"$here/plot.gp" 2>"$tmp/gnuplot.log"; then
		log "plot: $outdir/bench.png"
	else
		log "warning: gnuplot failed: $(head -3 "$tmp/gnuplot.log")"
	fi
fi
log "table: $outdir/bench.md"
