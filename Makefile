# agentd -- the two commands for people: `make run` and `make test`.
# Everything else lives in meson.build and build-aux/.

ADDR	?= 127.0.0.1:49984
SOCKET	?= $(if $(filter 0,$(shell id -u)),/run/agentd.sock,/tmp/agentd-$(shell id -u).sock)

.PHONY: all build run test static repro initramfs e2e bench fuzz soak clean distclean

all: build

build:
	@build-aux/deps.sh build
	@test -f build/build.ninja || meson setup build
	@meson compile -C build

# Serve in the foreground on $(ADDR) (not as PID 1), ready for curl; the web
# terminal at http://$(ADDR)/term/ (docs/web.md).
run: build
	exec build/agentd/agentd --listen $(ADDR) --socket $(SOCKET) \
		--web-dir build/web

# Every test: unit, integration (dev and static), sanitizers, PID 1, e2e.
test:
	@build-aux/test.sh

# The release binary: build-static/agentd/agentd (static musl, stripped).
static:
	@build-aux/static.sh build

# build-static/initramfs.cpio.gz: the static agentd as /init of a bare VM.
initramfs:
	@initramfs/build.sh

# Boot it in qemu (TCG) and test it from the host (tests/e2e/e2e.py), then
# snapshot and restore it (tests/e2e/restore.py).
e2e: initramfs
	@AGENTD=build-static/agentd/agentd /usr/bin/python3 tests/e2e/e2e.py
	@AGENTD=build-static/agentd/agentd /usr/bin/python3 tests/e2e/restore.py

# The libFuzzer harnesses (tests/fuzz: ring, http, proto, fetch) built with clang in
# build-fuzz/, FUZZ_SECONDS each (default 60); crashers land in
# build-fuzz/fuzz-artifacts/.
FUZZ_SECONDS ?= 60
fuzz:
	@build-aux/deps.sh build test
	@test -f build-fuzz/build.ninja || CC=clang meson setup build-fuzz
	@meson compile -C build-fuzz
	@for h in ring http proto fetch; do \
		FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run-fuzz.sh build-fuzz $$h || exit 1; \
	done

# The long soak (tests/soak/soak.py) on the dev build, SOAK_SECONDS (default 180).
SOAK_SECONDS ?= 180
soak: build
	@AGENTD=build/agentd/agentd /usr/bin/python3 tests/soak/soak.py \
		--seconds $(SOAK_SECONDS)

# The benchmarks (bench/run.sh): installs the bench packages, builds dev and
# static, runs every scenario against its baselines (private sshd and tmux),
# prints one table and writes bench/results/bench.{md,tsv,png}.
bench:
	@bench/run.sh

# Two release builds from scratch (the deps cache kept) must be identical.
repro:
	@build-aux/static.sh repro

clean:
	rm -rf build build-asan build-tsan build-fuzz
	@build-aux/static.sh clean 2>/dev/null || true

# Also the cached musl builds of libevent, jansson and mbedTLS.
distclean: clean
	@build-aux/static.sh distclean
