#!/bin/sh
# run-fuzz.sh BUILDDIR HARNESS -- run one libFuzzer harness of BUILDDIR
# (ring, http, proto or fetch; built by tests/fuzz/meson.build with
# CC=clang).
#
# First every kept crasher of tests/fuzz/regress/HARNESS is replayed (each
# must pass now); then the harness fuzzes for FUZZ_SECONDS (default 15)
# from its seed corpus, in a scratch corpus (the repository's seeds are
# never written to), and the executions are printed.  A crash leaves its
# input in FUZZ_ARTIFACTS (default BUILDDIR/fuzz-artifacts): fix the bug,
# then move the input into tests/fuzz/regress/HARNESS.
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
build=$(CDPATH= cd -- "$1" && pwd)
name=$2
secs=${FUZZ_SECONDS:-15}
case $name in
ring)	bin=$build/tests/fuzz/fuzz_ring seeds=$here/corpus/ring
	set -- -max_len=4096 ;;
http)	bin=$build/tests/fuzz/fuzz_http seeds=$here/corpus/http
	set -- -max_len=65536 -dict="$here/http.dict" ;;
proto)	bin=$build/tests/proto/fuzz_proto seeds=$root/tests/proto/corpus
	set -- -max_len=8192 ;;
fetch)	bin=$build/tests/fuzz/fuzz_fetch seeds=$here/corpus/fetch
	set -- -max_len=4096 ;;
multipart)	bin=$build/tests/fuzz/fuzz_multipart seeds=$here/corpus/multipart
	set -- -max_len=4096 ;;
*)	echo "run-fuzz.sh: no harness '$name' (ring, http, proto, fetch, multipart)" >&2
	exit 2 ;;
esac
regress=$here/regress/$name
art=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
mkdir -p "$art"
if [ ! -x "$bin" ]; then
	echo "fuzz_$name: $bin is not built (CC=clang meson setup $build)" >&2
	exit 1
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

if [ -d "$regress" ] && [ -n "$(ls -A "$regress" 2>/dev/null)" ]; then
	echo "fuzz_$name: replaying $(ls "$regress" | wc -l) kept inputs"
	"$bin" "$@" "$regress"/* >"$art/fuzz_$name.regress.log" 2>&1 || {
		tail -60 "$art/fuzz_$name.regress.log"
		echo "fuzz_$name: a kept input fails again" >&2
		exit 1
	}
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$art/fuzz_$name.log
echo "fuzz_$name: fuzzing for ${secs}s from $seeds"
rc=0
"$bin" "$@" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$art/fuzz_$name-" \
    "$work" "$seeds" >"$log" 2>&1 || rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
echo "fuzz_$name: ${runs:-?} executions in ${secs}s, $cov, $(ls "$work" | wc -l) new corpus inputs"
if [ "$rc" -ne 0 ]; then
	grep -v '^#' "$log" | tail -60
	echo "fuzz_$name: FAILED (exit $rc); the input is in $art/" >&2
	exit 1
fi
