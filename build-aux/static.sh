#!/bin/bash
# build-aux/static.sh [build|deps|check|clean|distclean|info]
#
# The release build: agentd linked static-pie against musl, stripped, reproducible.
#
#   build      (default) ensure the static deps, build libevent, jansson, mbedTLS for musl
#              into the cached prefix if not there yet, meson setup (first time) and
#              meson compile; checks that build-static/agentd/agentd is static.
#              Re-running is incremental: only `meson compile`.
#   deps       only the prefix and the generated cross file.
#   check      also build Check for musl into the prefix (for running the unit
#              tests on musl: see `info`). Not part of `build`.
#   clean      delete everything in build-static except the deps cache.
#   distclean  delete build-static.
#   repro      build twice from a clean build-static (deps cache kept) and
#              compare the two binaries' sha256; exit 1 if they differ.
#   info       print the prefix and the cross file paths.
#
# Environment: STATIC_DIR (default <source root>/build-static), DEPS_DIR (default
# $STATIC_DIR/deps), JOBS (default nproc), MESON_ARGS (extra meson options, e.g.
# -Dwerror=false; given to setup, or to meson configure once set up).
#
# The prefix is $DEPS_DIR/musl-<hash>, the hash covering the shared recipe (flags,
# cmake options), the specs file and the versions of musl, gcc, binutils, cmake
# and the kernel headers: a change of any of them builds a new prefix. In it,
# .stamp-<package> holds the Debian source version and the hash of the package's
# options: a new version (apt-get update) or new options rebuild that package only.
# Sources are Debian's source packages (apt-get source, Debian's patches applied),
# plus ours: build-aux/patches/NAME-*.patch, applied to a copy of the tree (the
# package's stamp holds their hash).
#
# Never run `meson setup --wipe build-static`: it deletes the deps cache too.
set -euo pipefail

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
SRCROOT=$(dirname "$here")
STATIC_DIR=${STATIC_DIR:-$SRCROOT/build-static}
DEPS_DIR=${DEPS_DIR:-$STATIC_DIR/deps}
JOBS=${JOBS:-$(nproc)}
MUSL_CC=$here/musl-cc
CROSS=$STATIC_DIR/musl-cross.ini

log() { printf 'static.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---- the recipe -------------------------------------------------------------
# Flags for the dependencies. -Os as agentd's own code: libevent, jansson,
# zlib and mbedtls at -O2 made the binary 37 KB larger (1,003,024 against
# 966,160 bytes at 18fc42d), and none of them is the hot path of output,
# which ringbuf/ and proto/ carry at -O3. -fPIE for static-pie; sections
# for --gc-sections and for build-aux/hot-text.ld's order; no unwind tables
# (C without exceptions: .eh_frame was 104 KB of the binary, with the
# project's own code built the same way); the same hardening as the
# project's own code. No -g, no NDEBUG (Debian keeps the asserts too). Path
# maps are added per package (see cmake_build).
DEP_CFLAGS="-Os -fPIE -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables -fno-unwind-tables -fstack-protector-strong -fstack-clash-protection -fcf-protection -isystem @KINC@"
CMAKE_COMMON=(
	-G Ninja
	-DCMAKE_BUILD_TYPE=Release
	-DCMAKE_C_FLAGS_RELEASE=
	-DCMAKE_POSITION_INDEPENDENT_CODE=ON
	-DCMAKE_INSTALL_LIBDIR=lib
	-DBUILD_SHARED_LIBS=OFF
	-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
)
LIBEVENT_OPTS=(
	-DEVENT__LIBRARY_TYPE=STATIC
	-DEVENT__DISABLE_OPENSSL=ON
	-DEVENT__DISABLE_MBEDTLS=ON
	-DEVENT__DISABLE_SAMPLES=ON
	-DEVENT__DISABLE_TESTS=ON
	-DEVENT__DISABLE_BENCHMARK=ON
	-DEVENT__DISABLE_REGRESS=ON
	-DEVENT__DISABLE_DEBUG_MODE=OFF
	-DEVENT__DOXYGEN=OFF
)
JANSSON_OPTS=(
	-DJANSSON_BUILD_SHARED_LIBS=OFF
	-DJANSSON_WITHOUT_TESTS=ON
	-DJANSSON_EXAMPLES=OFF
	-DJANSSON_BUILD_DOCS=OFF
)
# mbedTLS: the TLS and SHA-256 of files/fetch. Only the static libraries; its
# config.h is upstream's (as in Debian's source package) minus what a TLS 1.2
# client does not use (MBEDTLS_UNSET, applied by mbedtls_configure), so that
# the binary stays small. The dev build uses Debian's libmbedtls-dev as is.
MBEDTLS_OPTS=(
	-DENABLE_PROGRAMS=OFF
	-DENABLE_TESTING=OFF
	-DUSE_STATIC_MBEDTLS_LIBRARY=ON
	-DUSE_SHARED_MBEDTLS_LIBRARY=OFF
	-DMBEDTLS_FATAL_WARNINGS=OFF
	-DINSTALL_MBEDTLS_HEADERS=ON
)
# Off: the server side, DTLS, TLS 1.0/1.1, PSK and (EC)DH-static key exchanges,
# renegotiation, tickets, ALPN, legacy ciphers (ARC4, DES, Blowfish, XTEA,
# Camellia, CCM), rare curves, PSA, writers (PEM, PK, X.509), CRL/CSR, debug,
# self tests and the test certificates. Left: TLS 1.2 client, ECDHE-ECDSA,
# ECDHE-RSA and RSA key exchange, AES-GCM/CBC, ChaCha20-Poly1305, P-256/384/521
# and X25519, X.509 verification, SHA-1/2, error strings.
MBEDTLS_UNSET=(
	MBEDTLS_CIPHER_MODE_CFB MBEDTLS_CIPHER_MODE_CTR
	MBEDTLS_CIPHER_MODE_OFB MBEDTLS_CIPHER_MODE_XTS
	MBEDTLS_CIPHER_PADDING_ONE_AND_ZEROS
	MBEDTLS_CIPHER_PADDING_ZEROS_AND_LEN MBEDTLS_CIPHER_PADDING_ZEROS
	MBEDTLS_ECP_DP_SECP192R1_ENABLED MBEDTLS_ECP_DP_SECP224R1_ENABLED
	MBEDTLS_ECP_DP_SECP192K1_ENABLED MBEDTLS_ECP_DP_SECP224K1_ENABLED
	MBEDTLS_ECP_DP_SECP256K1_ENABLED MBEDTLS_ECP_DP_BP256R1_ENABLED
	MBEDTLS_ECP_DP_BP384R1_ENABLED MBEDTLS_ECP_DP_BP512R1_ENABLED
	MBEDTLS_ECP_DP_CURVE448_ENABLED MBEDTLS_ECDSA_DETERMINISTIC
	MBEDTLS_HMAC_DRBG_C MBEDTLS_KEY_EXCHANGE_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_DHE_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_ECDHE_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_RSA_PSK_ENABLED
	MBEDTLS_KEY_EXCHANGE_DHE_RSA_ENABLED
	MBEDTLS_KEY_EXCHANGE_ECDH_ECDSA_ENABLED
	MBEDTLS_KEY_EXCHANGE_ECDH_RSA_ENABLED MBEDTLS_GENPRIME
	MBEDTLS_PK_RSA_ALT_SUPPORT MBEDTLS_SELF_TEST
	MBEDTLS_SSL_CONTEXT_SERIALIZATION MBEDTLS_SSL_FALLBACK_SCSV
	MBEDTLS_SSL_CBC_RECORD_SPLITTING MBEDTLS_SSL_RENEGOTIATION
	MBEDTLS_SSL_MAX_FRAGMENT_LENGTH MBEDTLS_SSL_PROTO_TLS1
	MBEDTLS_SSL_PROTO_TLS1_1 MBEDTLS_SSL_PROTO_DTLS MBEDTLS_SSL_ALPN
	MBEDTLS_SSL_DTLS_ANTI_REPLAY MBEDTLS_SSL_DTLS_HELLO_VERIFY
	MBEDTLS_SSL_DTLS_CLIENT_PORT_REUSE MBEDTLS_SSL_DTLS_BADMAC_LIMIT
	MBEDTLS_SSL_SESSION_TICKETS MBEDTLS_SSL_EXPORT_KEYS
	MBEDTLS_SSL_TRUNCATED_HMAC MBEDTLS_SSL_RECORD_CHECKING
	MBEDTLS_VERSION_FEATURES MBEDTLS_ARC4_C MBEDTLS_BLOWFISH_C
	MBEDTLS_CAMELLIA_C MBEDTLS_CCM_C MBEDTLS_CERTS_C MBEDTLS_DEBUG_C
	MBEDTLS_DES_C MBEDTLS_DHM_C MBEDTLS_HKDF_C MBEDTLS_MD5_C MBEDTLS_NET_C
	MBEDTLS_PADLOCK_C MBEDTLS_PEM_WRITE_C MBEDTLS_PK_WRITE_C
	MBEDTLS_PKCS5_C MBEDTLS_PKCS12_C MBEDTLS_PSA_CRYPTO_C
	MBEDTLS_PSA_CRYPTO_STORAGE_C MBEDTLS_PSA_ITS_FILE_C
	MBEDTLS_RIPEMD160_C MBEDTLS_SSL_CACHE_C MBEDTLS_SSL_COOKIE_C
	MBEDTLS_SSL_TICKET_C MBEDTLS_SSL_SRV_C MBEDTLS_TIMING_C
	MBEDTLS_X509_CRL_PARSE_C MBEDTLS_X509_CSR_PARSE_C
	MBEDTLS_X509_CREATE_C MBEDTLS_X509_CRT_WRITE_C
	MBEDTLS_X509_CSR_WRITE_C MBEDTLS_XTEA_C
)
# zlib: inflate for gzip bodies of envd's POST /files (agentd/envd/envfiles.c).
# Its CMake builds a shared library and examples whatever it is told: only
# libz.a is kept.
ZLIB_OPTS=(
	-DSKIP_INSTALL_FILES=OFF
)

CHECK_OPTS=(
	-DCHECK_ENABLE_TESTS=OFF
	-DBUILD_TESTING=OFF
	-DCHECK_ENABLE_GCOV=OFF
	-DENABLE_MEMORY_LEAKING_TESTS=OFF
)
# -----------------------------------------------------------------------------

# Version of the source package that `apt-get source` would fetch now, read from
# the local Sources index (no download). apt takes ~1 s to answer, so the answers
# are kept in $DEPS_DIR/versions until an `apt-get update` touches the index.
SRC_PKGS="libevent jansson mbedtls check"
src_version() {
	local cache=$DEPS_DIR/versions
	if [ ! -s "$cache" ] || ! grep -q "^$1 " "$cache" || [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Sources*' -newer "$cache" 2>/dev/null)" ]; then
		mkdir -p "$DEPS_DIR"
		apt-get source --only-source --print-uris $SRC_PKGS 2>/dev/null |
			awk '$2 ~ /\.dsc$/ { f = $2; sub(/\.dsc$/, "", f); i = index(f, "_"); print substr(f, 1, i - 1), substr(f, i + 1) }' \
			>"$cache.tmp"
		mv "$cache.tmp" "$cache"
	fi
	local v
	v=$(awk -v p="$1" '$1 == p { print $2; exit }' "$cache")
	[ -n "$v" ] || { rm -f "$cache"; die "cannot resolve the source package '$1' (is deb-src enabled? run build-aux/deps.sh static)"; }
	printf '%s\n' "$v"
}

ensure_deps() {
	"$here/deps.sh" build static
}

# Sets LIBEVENT_VER JANSSON_VER MBEDTLS_VER PREFIX. The prefix is keyed by what
# every package shares (toolchain, musl, flags); each package's own stamp in it
# holds its Debian source version and the hash of its options (stamp_line).
resolve_prefix() {
	LIBEVENT_VER=$(src_version libevent)
	JANSSON_VER=$(src_version jansson)
	MBEDTLS_VER=$(src_version mbedtls)
	# zlib: Debian 12's own release, pinned: the security pool's
	# 1:1.2.13.dfsg-1+deb12u1 fixes minizip only (CVE-2023-45853), which is
	# not built here, and that pool is not always reachable.
	ZLIB_VER=1.2.13.dfsg-1
	local key
	key=$({
		echo "recipe 2"
		echo "$DEP_CFLAGS"
		printf '%s\n' "${CMAKE_COMMON[@]}"
		cat "$here/musl-gcc.specs" "$here/musl-cc"
		dpkg-query -W -f='${Package} ${Version}\n' musl-dev gcc-12 binutils linux-libc-dev cmake 2>/dev/null
		"${REALGCC:-x86_64-linux-gnu-gcc}" --version | head -1
	} | sha256sum | cut -c1-10)
	PREFIX=$DEPS_DIR/musl-$key
}

# stamp_line NAME VERSION OPTS...: what $PREFIX/.stamp-NAME holds once built.
stamp_line() {
	local name=$1 ver=$2; shift 2
	printf '%s %s %s\n' "$name" "$ver" "$(printf '%s\n' "$@" | sha256sum | cut -c1-10)"
}

# Set when a package was (re)built in this run: the agentd build is then redone
# from scratch, since ninja does not see the libraries change.
DEPS_CHANGED=no

# Fetch (once) and unpack Debian's source package $1=$2 into $DEPS_DIR/src/$1_$2;
# sets PKGSRC to the unpacked tree.
fetch_source() {
	local name=$1 ver=$2 dir
	dir=$DEPS_DIR/src/${name}_${ver#*:}
	if [ ! -f "$dir/.unpacked" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		log "apt-get source $name=$ver"
		# As root, apt warns that the download is unsandboxed (_apt cannot
		# write here): harmless, the files are checked against the signed index.
		# The version as apt names it: with its epoch (zlib's "1:").
		local aptver
		aptver=$(apt-cache showsrc --only-source "$name" 2>/dev/null | awk -v v="$ver" \
			'$1 == "Version:" { n = split($2, a, ":"); if ($2 == v || a[n] == v) { print $2; exit } }')
		(cd "$dir" && apt-get source -q --only-source "$name=${aptver:-$ver}" >apt-source.log 2>&1) ||
			{ cat "$dir/apt-source.log" >&2; die "apt-get source $name=$ver failed"; }
		touch "$dir/.unpacked"
	fi
	PKGSRC=$(find "$dir" -mindepth 2 -maxdepth 2 -name debian -type d -printf '%h\n' | head -1)
	[ -n "$PKGSRC" ] || die "no unpacked tree in $dir"
}

# cmake_build NAME VERSION OPTS...: configure, build, install into $PREFIX.
cmake_build() {
	local name=$1 ver=$2; shift 2
	local stamp=$PREFIX/.stamp-$name want patches extra= p
	patches=$(find "$here/patches" -name "$name-*.patch" 2>/dev/null | LC_ALL=C sort)
	[ -z "$patches" ] || extra="patches-$(cat $patches | sha256sum | cut -c1-10)"
	want=$(stamp_line "$name" "$ver" "$@" ${STAMP_EXTRA:-} $extra)
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
	fetch_source "$name" "$ver"
	local bdir=$DEPS_DIR/build/${name}_${ver#*:}
	rm -rf "$bdir" "$bdir.src"
	mkdir -p "$bdir" "$PREFIX"
	# Our patches go on a copy: the unpacked tree stays Debian's.
	if [ -n "$patches" ]; then
		cp -a "$PKGSRC" "$bdir.src"
		PKGSRC=$bdir.src
		for p in $patches; do
			patch -s -d "$PKGSRC" -p1 <"$p" || die "$name: $(basename "$p") does not apply"
		done
	fi
	local cflags=${DEP_CFLAGS//@KINC@/$PREFIX/kinc}
	cflags+=" -ffile-prefix-map=$PKGSRC=/usr/src/$name -ffile-prefix-map=$bdir=/usr/src/$name/build -ffile-prefix-map=$PREFIX=/deps"
	local sde
	sde=$(dpkg-parsechangelog -l "$PKGSRC/debian/changelog" -S Timestamp)
	log "building $name $ver for musl"
	local t0=$SECONDS
	(
		export SOURCE_DATE_EPOCH=$sde
		cmake -S "$PKGSRC" -B "$bdir" "${CMAKE_COMMON[@]}" \
			-DCMAKE_C_COMPILER="$MUSL_CC" \
			-DCMAKE_INSTALL_PREFIX="$PREFIX" \
			-DCMAKE_C_FLAGS="$cflags" \
			"$@"
		cmake --build "$bdir" -j "$JOBS"
		cmake --install "$bdir"
	) >"$bdir.log" 2>&1 || { tail -40 "$bdir.log" >&2; die "$name: build failed (log: $bdir.log)"; }
	echo "$want" >"$stamp"
	DEPS_CHANGED=yes
	log "$name done in $((SECONDS - t0)) s"
}

make_kinc() {
	# linux/, asm/ and asm-generic/ of the kernel headers, and nothing else: never
	# -idirafter /usr/include (it drags glibc's headers in silently).
	# Plus sys/queue.h, which musl does not have (Alpine ships it separately, in
	# bsd-compat-headers): glibc's copy is macros only and includes nothing.
	local k=$PREFIX/kinc
	mkdir -p "$k/sys"
	ln -sfn /usr/include/linux "$k/linux"
	ln -sfn /usr/include/x86_64-linux-gnu/asm "$k/asm"
	ln -sfn /usr/include/asm-generic "$k/asm-generic"
	ln -sfn /usr/include/x86_64-linux-gnu/sys/queue.h "$k/sys/queue.h"
}

# The .pc files name the prefix relative to themselves, so that the cache still
# works when the tree is moved or copied.
relocatable_pc() {
	local pc
	for pc in "$PREFIX"/lib/pkgconfig/*.pc; do
		grep -qF "$PREFIX" "$pc" && sed -i "s|$PREFIX|\${pcfiledir}/../..|g" "$pc"
	done
	return 0
}

write_cross() {
	local want
	want=$(sed -e "s|@MUSL_CC@|$MUSL_CC|g" -e "s|@PREFIX@|$PREFIX|g" "$here/musl-cross.ini.in")
	if [ -f "$CROSS" ] && [ "$(cat "$CROSS")" = "$want" ]; then
		return 0
	fi
	# A new cross file (new prefix, new flags): the old configuration is stale.
	if [ -f "$STATIC_DIR/meson-private/coredata.dat" ]; then
		log "cross file changed: reconfiguring from scratch (deps cache kept)"
		clean_build
	fi
	mkdir -p "$STATIC_DIR"
	printf '%s\n' "$want" >"$CROSS"
}

# mbedTLS's config.h: the source tree's pristine copy minus MBEDTLS_UNSET.
# Idempotent; a no-op once mbedtls is built into the prefix.
mbedtls_configure() {
	[ "$(cat "$PREFIX/.stamp-mbedtls" 2>/dev/null)" = "$(stamp_line mbedtls "$MBEDTLS_VER" "${MBEDTLS_OPTS[@]}" "${MBEDTLS_UNSET[@]}")" ] &&
		return 0
	fetch_source mbedtls "$MBEDTLS_VER"
	local cfg=$PKGSRC/include/mbedtls/config.h o
	[ -f "$cfg.orig" ] || cp "$cfg" "$cfg.orig"
	cp "$cfg.orig" "$cfg"
	for o in "${MBEDTLS_UNSET[@]}"; do
		sed -i -E "s|^#define $o( .*)?\$|//#define $o\\1|" "$cfg"
		if grep -qE "^#define $o( |\$)" "$cfg"; then die "mbedtls: cannot unset $o"; fi
	done
	return 0
}

# mbedTLS 2.28 installs no .pc file: write one (relative, like the others).
mbedtls_pc() {
	local pc=$PREFIX/lib/pkgconfig/mbedtls.pc
	grep -qxF "Version: ${MBEDTLS_VER#*:}" "$pc" 2>/dev/null && return 0
	mkdir -p "$PREFIX/lib/pkgconfig"
	cat >"$pc" <<EOF
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: mbedtls
Description: mbed TLS (TLS, X.509 and crypto), static
Version: ${MBEDTLS_VER#*:}
Cflags: -I\${includedir}
Libs: -L\${libdir} -lmbedtls -lmbedx509 -lmbedcrypto
EOF
}

build_deps() {
	resolve_prefix
	make_kinc
	cmake_build libevent "$LIBEVENT_VER" "${LIBEVENT_OPTS[@]}"
	cmake_build jansson "$JANSSON_VER" "${JANSSON_OPTS[@]}"
	mbedtls_configure
	STAMP_EXTRA="${MBEDTLS_UNSET[*]}" cmake_build mbedtls "$MBEDTLS_VER" "${MBEDTLS_OPTS[@]}"
	mbedtls_pc
	cmake_build zlib "$ZLIB_VER" "${ZLIB_OPTS[@]}" \
		-DINSTALL_PKGCONFIG_DIR="$PREFIX/lib/pkgconfig"
	rm -f "$PREFIX"/lib/libz.so* "$PREFIX"/share/pkgconfig/zlib.pc
	local pc
	for pc in libevent_core libevent_extra libevent_pthreads jansson mbedtls zlib; do
		[ -f "$PREFIX/lib/pkgconfig/$pc.pc" ] || die "$pc.pc missing from $PREFIX"
	done
	relocatable_pc
	write_cross
	if [ "$DEPS_CHANGED" = yes ] && [ -f "$STATIC_DIR/meson-private/coredata.dat" ]; then
		log "dependencies rebuilt: reconfiguring from scratch"
		clean_build
		write_cross
	fi
}

build_check() {
	resolve_prefix
	build_deps
	local ver
	ver=$(src_version check)
	cmake_build check "$ver" "${CHECK_OPTS[@]}"
	# Check builds a shared library whatever it is told: keep only libcheck.a.
	rm -f "$PREFIX"/lib/libcheck.so*
	# Debian's check.pc (01pkgconfig.patch) names Debian's libcheck_pic.a.
	ln -sfn libcheck.a "$PREFIX/lib/libcheck_pic.a"
	relocatable_pc
	[ -f "$PREFIX/lib/libcheck.a" ] && [ -f "$PREFIX/lib/pkgconfig/check.pc" ] ||
		die "check: libcheck.a or check.pc missing"
}

clean_build() {
	[ -d "$STATIC_DIR" ] || return 0
	find "$STATIC_DIR" -mindepth 1 -maxdepth 1 ! -name deps ! -name .lock -exec rm -rf {} +
}

build_agentd() {
	# MESON_ARGS: extra options (say -Dwerror=false), word-split.
	if [ ! -f "$STATIC_DIR/meson-private/coredata.dat" ]; then
		meson setup "$STATIC_DIR" "$SRCROOT" --cross-file "$CROSS" \
			-Dstatic=true -Dtests=disabled --buildtype=release -Db_pie=true ${MESON_ARGS:-}
	elif [ -n "${MESON_ARGS:-}" ]; then
		meson configure "$STATIC_DIR" $MESON_ARGS
	fi
	# Reproducible: __DATE__ and friends follow the commit, not the clock.
	SOURCE_DATE_EPOCH=$(git -C "$SRCROOT" log -1 --format=%ct 2>/dev/null || echo 0)
	export SOURCE_DATE_EPOCH
	meson compile -C "$STATIC_DIR" -j "$JOBS"
	local bin=$STATIC_DIR/agentd/agentd
	[ -f "$bin" ] || die "$bin was not built"
	local desc
	desc=$(file -b "$bin")
	case $desc in
	*"static-pie linked"* | *"statically linked"*) ;;
	*) die "$bin is not static: $desc" ;;
	esac
	if readelf -lW "$bin" | grep -q INTERP; then die "$bin has a program interpreter"; fi
	case $desc in *"not stripped"*) strip --strip-all "$bin" ;; esac
	log "$(file -b "$bin")"
	log "$(stat -c %s "$bin") bytes  sha256 $(sha256sum "$bin" | cut -d' ' -f1)  $bin"
}

cmd=${1:-build}
case $cmd in
distclean) rm -rf "$STATIC_DIR"; exit 0 ;;
clean)     clean_build; exit 0 ;;
build | deps | check | repro | info) ;;
*) echo "usage: $0 [build|deps|check|repro|clean|distclean|info]" >&2; exit 2 ;;
esac

mkdir -p "$STATIC_DIR"
exec 9>"$STATIC_DIR/.lock"
flock 9

case $cmd in
info)
	resolve_prefix
	echo "prefix=$PREFIX"
	echo "cross_file=$CROSS"
	;;
deps)  ensure_deps; build_deps ;;
check) ensure_deps; build_deps; build_check ;;
build) ensure_deps; build_deps; build_agentd ;;
repro)
	ensure_deps
	sums=()
	for i in 1 2; do
		clean_build
		build_deps
		build_agentd >&2
		sums+=("$(sha256sum "$STATIC_DIR/agentd/agentd" | cut -d' ' -f1)")
		log "run $i: ${sums[-1]}"
	done
	[ "${sums[0]}" = "${sums[1]}" ] || die "not reproducible: ${sums[0]} != ${sums[1]}"
	log "reproducible: ${sums[0]}"
	;;
esac
