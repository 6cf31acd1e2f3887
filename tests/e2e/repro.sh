#!/bin/sh
# tests/e2e/repro.sh -- the initramfs is reproducible: two builds from the same
# inputs (AGENTD, the kernel's modules, busybox) are byte-identical.
# Exit 77 (skipped) when the kernel or busybox-static is missing.
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
: "${AGENTD:=$root/build-static/agentd/agentd}"
ls /lib/modules/*/modules.dep >/dev/null 2>&1 && [ -x /bin/busybox ] ||
	{ echo "SKIP: no kernel modules or busybox-static (build-aux/deps.sh e2e)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 1 2; do
	NO_DEPS=1 AGENTD=$AGENTD OUT=$tmp/$n.cpio.gz "$root/initramfs/build.sh"
done
a=$(sha256sum <"$tmp/1.cpio.gz") b=$(sha256sum <"$tmp/2.cpio.gz")
if [ "$a" = "$b" ]; then
	echo "PASS initramfs reproducible: ${a%% *}"
else
	echo "FAIL initramfs differs between two builds: ${a%% *} ${b%% *}"
	exit 1
fi
