#!/bin/sh
# build-aux/deps.sh [--list|--check] GROUP...
#
# Installs the Debian packages that the named groups need, and nothing when they
# are all present already (one dpkg-query, no apt-get, well under a second).
# Groups: build static test e2e bench profile (or "all"); profile is the tools
# of build-aux/hot-text.sh.  The build group also brings
# xterm.js of web/ (npm ci from its lockfile) and the test group the Node
# packages of tests/node and tests/web, when they are missing.
#
#   build-aux/deps.sh build test     install what is missing (root), or print the
#                                    sudo line and exit 1 (not root)
#   build-aux/deps.sh --check static exit 1 and name what is missing; change nothing
#   build-aux/deps.sh --list e2e     print the group's packages, one a line
#
# The "static" group also needs deb-src entries in APT (for `apt-get source`):
# they are enabled here, idempotently, in the deb822 /etc/apt/sources.list.d/*.sources.
#
# This file is the one place where the package lists live.
set -eu

# ---- the lists --------------------------------------------------------------
pkgs_build="gcc meson ninja-build pkg-config libevent-dev libjansson-dev libmbedtls-dev check python3"
pkgs_static="musl-tools musl-dev cmake dpkg-dev file binutils"
pkgs_test="clang libclang-rt-14-dev valgrind curl procps util-linux tmux busybox-static python3 openssl golang-go python3-pytest python3-jsonschema python3-yaml chromium asciinema"
pkgs_e2e="qemu-system-x86 linux-image-amd64 cpio busybox-static nfs-ganesha nfs-ganesha-vfs rpcbind"
pkgs_bench="openssh-server openssh-client tmux wrk gnuplot-nox"
pkgs_profile="valgrind linux-perf curl"
all_groups="build static test e2e bench profile"
# -----------------------------------------------------------------------------

usage() {
	echo "usage: $0 [--list|--check] GROUP... (groups: $all_groups all)" >&2
	exit 2
}

group_pkgs() {
	case "$1" in
	build)  echo "$pkgs_build" ;;
	static) echo "$pkgs_static" ;;
	test)   echo "$pkgs_test" ;;
	e2e)    echo "$pkgs_e2e" ;;
	bench)  echo "$pkgs_bench" ;;
	profile) echo "$pkgs_profile" ;;
	*) echo "deps.sh: unknown group '$1' (groups: $all_groups all)" >&2; exit 2 ;;
	esac
}

mode=install
case "${1:-}" in
--list)  mode=list; shift ;;
--check) mode=check; shift ;;
-h|--help) usage ;;
esac
[ $# -gt 0 ] || usage

groups=
for g in "$@"; do
	if [ "$g" = all ]; then groups="$groups $all_groups"; else groups="$groups $g"; fi
done

want=
want_src=no
for g in $groups; do
	want="$want $(group_pkgs "$g")"
	[ "$g" = static ] && want_src=yes
done
want=$(printf '%s\n' $want | sort -u)

if [ "$mode" = list ]; then
	printf '%s\n' $want
	exit 0
fi

# ---- what is missing --------------------------------------------------------
# ${db:Status-Abbrev} is "ii " for an installed package; unknown names print nothing.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' $want 2>/dev/null |
	awk '$2 == "ii" { print $1 }' | sort -u)
missing=$(printf '%s\n' $want | grep -vxF -e "$installed" || true)
[ -n "$installed" ] || missing=$want
missing=$(echo $missing)

# deb-src: every deb822 stanza of /etc/apt/sources.list.d/*.sources that has
# "Types: deb" must also have deb-src, and the Sources indices must exist.
src_files=
src_missing=no
if [ "$want_src" = yes ]; then
	src_files=$(ls /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	for f in $src_files; do
		if grep -Eq '^Types:' "$f" && grep -E '^Types:' "$f" | grep -vq 'deb-src'; then
			src_missing=yes
		fi
	done
	if ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then
		src_missing=yes
	fi
fi

# The Node packages of the folders named, npm ci from each lockfile, when
# node_modules is missing or older than it: xterm.js of the web terminal
# (web/, build; web/build.sh also installs it when missing), the clients of
# the tests (tests/node) and puppeteer-core of the browser tests (tests/web).
# node and npm come with the machine.
node_deps() {
	local root dir
	root=$(cd "$(dirname "$0")/.." && pwd)
	for dir in "$@"; do
		dir=$root/$dir
		[ -f "$dir/package-lock.json" ] || continue
		if [ -f "$dir/node_modules/.package-lock.json" ] &&
		    [ ! "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
			continue
		fi
		if [ "$mode" = check ]; then
			echo "deps.sh: ${dir#$root/}: npm ci needed" >&2
			return 1
		fi
		command -v npm >/dev/null || { echo "deps.sh: npm not found (${dir#$root/})" >&2; return 1; }
		echo "deps.sh: npm ci in ${dir#$root/}" >&2
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || return 1
	done
}
if [ "$mode" != list ]; then
	case " $groups " in *" build "*) node_deps web || exit 1 ;; esac
	case " $groups " in *" test "*) node_deps tests/node tests/web || exit 1 ;; esac
fi

[ -z "$missing" ] && [ "$src_missing" = no ] && exit 0

if [ "$mode" = check ]; then
	[ -n "$missing" ] && echo "deps.sh: missing packages: $missing" >&2
	[ "$src_missing" = yes ] && echo "deps.sh: deb-src is not enabled (or apt-get update not run since)" >&2
	exit 1
fi

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: not root and something is missing; run:" >&2
	if [ "$src_missing" = yes ]; then
		for f in $src_files; do
			echo "sudo sed -i -E '/^Types:/{/deb-src/!s/\$/ deb-src/}' $f" >&2
		done
		echo "sudo apt-get update" >&2
	fi
	[ -n "$missing" ] &&
		echo "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing"
	exit 1
fi

# ---- install (root) ---------------------------------------------------------
if [ "$src_missing" = yes ]; then
	for f in $src_files; do
		sed -i -E '/^Types:/{/deb-src/!s/$/ deb-src/}' "$f"
	done
fi
echo "deps.sh: apt-get update" >&2
apt-get update -qq
if [ -n "$missing" ]; then
	echo "deps.sh: installing $missing" >&2
	# INITRD=No: linux-image-amd64's hooks would build /boot/initrd.img
	# (twice, minutes each); agentd boots its own initramfs.
	INITRD=No DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends $missing
fi
