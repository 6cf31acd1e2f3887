#!/bin/sh
# memcheck.sh -- the integration suite against agentd under valgrind.
#
#   AGENTD=build/agentd/agentd tests/hostile/memcheck.sh test_sessions
# runs tests/run.py test_sessions in tests/integration, with this script as AGENTD,
# which then runs the real agentd under memcheck.  Any memory error, and
# any definitely lost block at agentd's exit, makes agentd's exit status 99,
# which the harness reports as a failure (valgrind's report is in agentd's
# stderr, printed with it).  AGENTD_IT_SLOW (default 4) stretches the
# harness's timeouts.  MEMCHECK_SUITE names another folder of tests/
# (envd).  TEST_QUICK=1: skipped (exit 77).
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
if [ -n "${AGENTD_MEMCHECK_REAL:-}" ]; then
	exec valgrind --quiet --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
	    --child-silent-after-fork=yes --trace-children=no \
	    --num-callers=30 "$AGENTD_MEMCHECK_REAL" "$@"
fi
if [ "${TEST_QUICK:-0}" = 1 ]; then
	echo "memcheck: skipped (TEST_QUICK=1)"
	exit 77
fi
: "${AGENTD:?AGENTD: the agentd binary to check}"
command -v valgrind >/dev/null || { echo "memcheck: no valgrind"; exit 77; }
AGENTD_MEMCHECK_REAL=$(readlink -f "$AGENTD")
export AGENTD_MEMCHECK_REAL
AGENTD="$here/memcheck.sh"
AGENTD_IT_SLOW=${AGENTD_IT_SLOW:-4}
export AGENTD AGENTD_IT_SLOW
cd "$here/../${MEMCHECK_SUITE:-integration}" &&
    exec /usr/bin/python3 ../run.py "$@"
