"""Runs test modules of the Python suites with unittest (verbosity 2).

Usage, from a suite's folder (meson runs it there):
    AGENTD=build/agentd/agentd /usr/bin/python3 ../run.py test_ns [test_child ...]
or with paths from anywhere:
    AGENTD=build/agentd/agentd /usr/bin/python3 tests/run.py tests/pid1/test_ns.py
--need VAR: VAR must be set too (agentctl's suite: --need AGENTCTL).
The integration harness (tests/integration/harness.py) is always importable.
Exits 0 when all pass, 77 (meson's "skipped") when every test skipped, 1 when
one fails, 2 on a usage error.
"""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))


def main(args):
    need = ['AGENTD']
    while args[:1] == ['--need'] and len(args) > 1:
        need.append(args[1])
        args = args[2:]
    if not args:
        sys.stderr.write('usage: run.py [--need VAR] MODULE [MODULE...]\n')
        return 2
    for var in need:
        if not os.environ.get(var):
            sys.stderr.write('run.py: %s is not set\n' % var)
            return 2
    sys.path.insert(0, os.path.join(here, 'integration'))
    sys.path.insert(0, os.getcwd())
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in args:
        folder, name = os.path.split(name)
        if folder:
            sys.path.insert(0, os.path.abspath(folder))
        if name.endswith('.py'):
            name = name[:-3]
        suite.addTests(loader.loadTestsFromName(name))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.skipped and len(result.skipped) >= result.testsRun:
        return 77
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
