#!/bin/sh
# build-aux/web.sh SRC OUT -- the meson target `web`: the web terminal's page
# from the source folder SRC (web/) into OUT (<builddir>/web) by SRC/build.sh
# SRC OUT, when SRC has one; else nothing (agentd then serves no page).
set -eu
[ -f "$1/build.sh" ] || exit 0
exec bash "$1/build.sh" "$1" "$2"
