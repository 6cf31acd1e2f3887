#!/bin/bash
# build-aux/test.sh -- what `make test` runs: every suite, on the dev build,
# the static release build and the sanitizer builds, then one summary line.
#
# Environment: TEST_QUICK=1 skips the slow suites (sanitizers, e2e).
set -uo pipefail

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
cd "$root" || exit 1

failed_steps=()
logs=()

step() {
	local name=$1; shift
	printf '\n==> %s\n' "$name"
	if "$@"; then
		return 0
	fi
	failed_steps+=("$name")
	return 1
}

# meson test in a build dir, its log kept for the summary under a name of
# its own: several steps test one build dir, and each run rewrites
# testlog.json.
mtest() {
	local dir=$1; shift
	local log="$dir/meson-logs/testlog.json" rc
	rm -f "$log"
	meson test -C "$dir" --print-errorlogs "$@"
	rc=$?
	if [ -f "$log" ]; then
		local kept="$dir/meson-logs/testlog-step${#logs[@]}.json"
		cp "$log" "$kept" && logs+=("$kept")
	fi
	return $rc
}

setup() {
	local dir=$1; shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" || return 1
	fi
	meson compile -C "$dir"
}

step "dependencies" "$here/deps.sh" build static test || exit 1

# 1. The dev build: unit tests and the integration suite.
step "dev build" setup build && step "dev tests" mtest build

# 2. The release build, and the integration suite against it.
step "static build" "$here/static.sh" build &&
	step "static tests" mtest build-static --suite integration

# 3. Sanitizers: ASan+UBSan on everything, TSan on the ring.
if [ "${TEST_QUICK:-0}" != 1 ]; then
	step "asan build" setup build-asan -Db_sanitize=address,undefined \
		-Db_lundef=false --buildtype=debug &&
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		step "asan tests" mtest build-asan
	CC=clang step "tsan build" setup build-tsan -Db_sanitize=thread \
		-Db_lundef=false --buildtype=debugoptimized &&
		step "tsan tests" mtest build-tsan --suite ring
fi

# 4. More suites register their steps here (PID 1, e2e, fuzz, bench smoke).
# -- steps --
# e2e: the initramfs of the static build booted in qemu (TCG), tested from the host.
if [ "${TEST_QUICK:-0}" != 1 ]; then
	step "e2e deps" "$here/deps.sh" e2e &&
		step "initramfs" "$root/initramfs/build.sh" &&
		step "e2e tests" mtest build-static --suite e2e --verbose
fi
# PID 1 (tests/pid1) on the release binary; the dev build ran it in "dev tests".
# Its VM test needs qemu and a kernel (the e2e deps above); it skips without.
step "pid1 build" test -x build-static/agentd/agentd &&
	step "pid1 tests" mtest build-static --suite pid1
# Hardening: the dev and ASan steps above already ran suites hostile and
# soak (short), and the dev one memcheck (the integration suite under
# valgrind).  Here: hostile clients and the short soak on the release
# binary, the fetch threads under TSan, then the libFuzzer harnesses
# briefly (clang, build-fuzz).
step "static hostile" mtest build-static --suite hostile --suite soak
if [ "${TEST_QUICK:-0}" != 1 ]; then
	# The threaded path (files' fetch workers) under TSan, on agentd
	# built with it (a race report fails agentd's exit, so the test).
	step "tsan threads" mtest build-tsan --suite files
	CC=clang step "fuzz build" setup build-fuzz \
		--buildtype=debugoptimized &&
		FUZZ_SECONDS=${FUZZ_SECONDS:-15} \
		step "fuzz" mtest build-fuzz --suite fuzz --verbose
fi
# bench smoke: every scenario of bench/ tiny (< 60 s), its baselines
# included; it fails on a broken scenario, never on a number.
step "bench smoke" "$root/bench/run.sh" --quick
# -- end of steps --

# The summary, over every meson test run above.
/usr/bin/python3 - "${logs[@]}" <<'PY'
import json, os, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    for line in open(path):
        r = json.loads(line)
        res = r.get("result")
        if res in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif res == "SKIP":
            skipped += 1
        else:
            failed += 1
            print("FAILED:", os.path.dirname(os.path.dirname(path)),
                  r.get("name"), res)
print()
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
if [ ${#failed_steps[@]} -gt 0 ]; then
	printf 'failed steps: %s\n' "${failed_steps[*]}"
	exit 1
fi
