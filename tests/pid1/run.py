"""Runs test modules of the PID 1 suite with unittest (verbosity 2).

Usage: AGENTD=path/to/agentd /usr/bin/python3 run.py test_ns [test_child ...]
Exits 0 when all pass, 77 (meson's "skipped") when every test skipped (not
root), 1 otherwise.
"""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)


def main():
    if len(sys.argv) < 2:
        sys.stderr.write('usage: run.py MODULE [MODULE...]\n')
        return 2
    if not os.environ.get('AGENTD'):
        sys.stderr.write('run.py: AGENTD (path to the agentd binary) is not set\n')
        return 2
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in sys.argv[1:]:
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
    sys.exit(main())
