#!/bin/bash
# initramfs/build.sh -- what `make initramfs` runs.
#
# Builds build-static/initramfs.cpio.gz: the static agentd as /init, the static
# agentctl as /bin/agentctl, busybox-static, and the virtio NIC's and vsock's kernel
# modules of the Debian kernel installed by the "e2e" dependency group
# (linux-image-amd64). See initramfs/mkinitramfs.py for the contents.
#
# Environment:
#   KVER               kernel version whose modules go in (default: the newest with
#                      both /boot/vmlinuz-KVER and /lib/modules/KVER)
#   AGENTD             the agentd binary (default: build-static/agentd/agentd, built
#                      first by build-aux/static.sh)
#   OUT                default build-static/initramfs.cpio.gz
#   AGENTCTL           the agentctl binary (default: agentctl/agentctl beside
#                      AGENTD's build directory, when it is there)
#   MODULES            kernel modules to ship, dependencies added (default
#                      virtio_pci,virtio_net: qemu's virtio-net-pci;
#                      inet_diag,tcp_diag,udp_diag: sock_diag for GET /v1/ports;
#                      vsock,vmw_vsock_virtio_transport,vsock_loopback: the
#                      --vsock-listen transports, loaded by agentd as PID 1;
#                      nfsv3 (with nfs, sunrpc, lockd, grace, nfs_acl,
#                      fscache, netfs from modules.dep): the kernel NFSv3
#                      mounts of envd's /init volumeMounts)
#   WEB                the web terminal's page, installed as /usr/share/agentd/web
#                      (default: web/ beside AGENTD's build directory, else
#                      build/web, the dev build's, when there is one)
#   SOURCE_DATE_EPOCH  the mtime of every entry (default 0)
#   NO_DEPS=1          do not run build-aux/deps.sh / static.sh (the caller did)
set -euo pipefail

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
cd "$root"

if [ "${NO_DEPS:-0}" != 1 ]; then
	build-aux/deps.sh e2e
	[ -n "${AGENTD:-}" ] || build-aux/static.sh build
fi
AGENTD=${AGENTD:-build-static/agentd/agentd}
OUT=${OUT:-build-static/initramfs.cpio.gz}
if [ -z "${AGENTCTL+x}" ]; then
	AGENTCTL=$(dirname "$(dirname "$AGENTD")")/agentctl/agentctl
	[ -x "$AGENTCTL" ] || { echo "initramfs/build.sh: no $AGENTCTL: the initramfs has no agentctl" >&2; AGENTCTL=; }
fi

if [ -z "${WEB+x}" ]; then
	WEB=$(dirname "$(dirname "$AGENTD")")/web
	[ -d "$WEB" ] || WEB=build/web
	[ -d "$WEB" ] || WEB=
fi

if [ -z "${KVER:-}" ]; then
	KVER=$(for v in /lib/modules/*/modules.dep; do
		v=${v#/lib/modules/}; v=${v%/modules.dep}
		[ -f "/boot/vmlinuz-$v" ] && echo "$v"
	done | sort -V | tail -n 1)
	[ -n "$KVER" ] || { echo "initramfs/build.sh: no kernel: install linux-image-amd64 (build-aux/deps.sh e2e)" >&2; exit 1; }
fi

mkdir -p "$(dirname "$OUT")"
exec /usr/bin/python3 "$here/mkinitramfs.py" --agentd "$AGENTD" ${AGENTCTL:+--agentctl "$AGENTCTL"} \
	${WEB:+--web "$WEB"} \
	--kver "$KVER" --busybox /bin/busybox \
	--modules "${MODULES-virtio_pci,virtio_net,inet_diag,tcp_diag,udp_diag,vsock,vmw_vsock_virtio_transport,vsock_loopback,nfsv3}" \
	--out "$OUT"
