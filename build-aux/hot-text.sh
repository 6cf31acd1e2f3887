#!/bin/bash
# build-aux/hot-text.sh -- rewrite build-aux/hot-text.ld: the functions an idle
# agentd runs, placed together at the start of the release binary's text.
#
# Why: the kernel maps a file's pages around each page fault (fault-around,
# 64 KiB), so an idle agentd whose few hundred startup and /healthz
# functions lie scattered over 700 KB of text had nearly all of it
# resident (636 of 700 KiB at e78421a): most of the idle RSS. Placed
# together, they take a few of those windows.
#
# How: the release link of build-static is run again unstripped with a link
# map. That binary runs under valgrind's callgrind through what an idle
# agentd does (start, listen on TCP, the unix socket and envd's port,
# /healthz on each, one command and its output, a quiet second, SIGTERM):
# every function callgrind saw is listed by its input section
# (`.text.NAME`: everything is built with -ffunction-sections; musl's
# assembly by its archive member). Then, as
# valgrind lacks some system calls (pidfd_open) and agentd takes other
# paths without them, the same run natively under `perf record -e
# page-faults`, linked with the list, until no instruction outside the
# list faults; then as a bare VM's PID 1 in qemu, whose start (mounts,
# modules, ip=, cgroups) runs more, the faults read from the guest kernel's
# tracepoint (hot-text-vm.py; HOT_TEXT_VM=0 skips it). The list only
# orders the link: a function missing from it is still linked, only
# elsewhere.
#
# Run it after changes to startup, the loop or the HTTP layer, then
# `build-aux/static.sh build` and compare idle VmRSS (docs/build.md). Its
# tools (valgrind, perf) are build-aux/deps.sh's group profile, qemu the
# e2e group's.
#
# Usage: build-aux/hot-text.sh [STATIC_DIR]   (default build-static)
set -euo pipefail

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
static=${1:-$root/build-static}
out=$here/hot-text.ld

"$here/deps.sh" profile || exit 1
[ -f "$static/build.ninja" ] || { echo "hot-text.sh: no $static (build-aux/static.sh build)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The release link, unstripped (the cross file's -s dropped), with a map,
# and without the current order (so every section is named in the map).
link=$(ninja -C "$static" -t commands agentd/agentd | tail -n 1)
link=$(printf '%s' "$link" | sed -e 's/ -s / /g' -e 's/ -Wl,-T,[^ ]*hot-text\.ld//')
relink() { (cd "$static" && eval "$link $*"); }
relink -o "$work/agentd" -Wl,-Map="$work/map"

port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One idle run: listen, answer /healthz, run one command, stay quiet, stop.
# The words before `--` run the binary (under valgrind or perf); the rest
# are its flags.
idle() {
	local sock=$work/idle.sock
	local -a bin=()
	rm -f "$sock"
	while [ "$1" != -- ]; do bin+=("$1"); shift; done
	shift
	"${bin[@]}" --socket "$sock" "$@" >>"$work/idle.log" 2>&1 &
	local pid=$! i
	for i in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
	curl -s --unix-socket "$sock" http://x/healthz >/dev/null
	# The first thing a platform does: a command, its output, its exit.
	curl -s --unix-socket "$sock" -H 'Content-Type: application/json' \
		-d '{"id":"hot","cmd":"echo hot","yield_ms":5000}' \
		http://x/v1/sessions >/dev/null
	curl -s --unix-socket "$sock" 'http://x/v1/sessions/hot?cursor=0' >/dev/null
	for a in "$@"; do
		case $a in 127.0.0.1:*) curl -s "http://$a/healthz" >/dev/null || true ;; esac
	done
	sleep 1
	kill -TERM "$pid"
	wait "$pid" || true
}
scenarios=("--listen 127.0.0.1:$(port)"
	"--listen 127.0.0.1:$(port) --envd-listen 127.0.0.1:$(port)")
list=$work/list
for n in "${!scenarios[@]}"; do
	bin=(valgrind --tool=callgrind --callgrind-out-file="$work/$n.cg" "$work/agentd")
	idle "${bin[@]}" -- ${scenarios[$n]}
done
added=$(/usr/bin/python3 "$here/hot-text.py" rules "$work/map" "$list" "$work"/*.cg)
echo "hot-text.sh: callgrind: $added sections" >&2
for round in $(seq 40); do
	/usr/bin/python3 "$here/hot-text.py" write "$list" "$work/map" "$work/hot.ld" >/dev/null
	relink -o "$work/agentd-ordered" -Wl,-T,"$work/hot.ld"
	: >"$work/faults"
	for n in "${!scenarios[@]}"; do
		bin=(perf record -q -e page-faults -c 1 -d -o "$work/perf.data" "$work/agentd-ordered")
		idle "${bin[@]}" -- ${scenarios[$n]}
		perf script -i "$work/perf.data" -F ip,addr,sym 2>/dev/null |
			awk '{ print $3, $1, $4 }' >>"$work/faults"
	done
	added=$(/usr/bin/python3 "$here/hot-text.py" rules "$work/map" "$list" --faults "$work/faults")
	echo "hot-text.sh: faults, round $round: $added sections" >&2
	[ "$added" = 0 ] && break
done
# As a VM's PID 1 (qemu, the kernel of the e2e group): the same rounds, the
# faults from the guest's tracepoint (hot-text-vm.py).
if [ "${HOT_TEXT_VM:-1}" = 1 ]; then
	"$here/deps.sh" e2e || exit 1
	for round in $(seq 10); do
		/usr/bin/python3 "$here/hot-text.py" write "$list" "$work/map" "$work/hot.ld" >/dev/null
		relink -o "$work/agentd-ordered" -Wl,-T,"$work/hot.ld" -Wl,-Map="$work/ordered.map"
		strip --strip-all -o "$work/init" "$work/agentd-ordered"
		AGENTD="$work/init" AGENTCTL="$static/agentctl/agentctl" \
			OUT="$work/initramfs.cpio.gz" "$root/initramfs/build.sh" >/dev/null 2>&1 ||
			{ echo "hot-text.sh: initramfs/build.sh failed" >&2; exit 1; }
		rss=$(/usr/bin/python3 "$here/hot-text-vm.py" "$work/initramfs.cpio.gz" \
			"$work/vm-faults" 2>>"$work/vm.log" | tail -n 1) ||
			{ cat "$work/vm.log" >&2; exit 1; }
		added=$(/usr/bin/python3 "$here/hot-text.py" rules "$work/map" "$list" \
			--vm "$work/vm-faults" "$work/ordered.map")
		echo "hot-text.sh: the VM, round $round: VmRSS $rss, $added sections" >&2
		[ "$added" = 0 ] && break
	done
fi
/usr/bin/python3 "$here/hot-text.py" write "$list" "$work/map" "$out" >&2

