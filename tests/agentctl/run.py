"""Runs agentctl test modules with unittest (verbosity 2).

Usage: AGENTD=path/to/agentd AGENTCTL=path/to/agentctl python3 run.py test_exec
Exits non-zero when a test fails or errors.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    if len(sys.argv) < 2:
        sys.stderr.write('usage: run.py MODULE [MODULE...]\n')
        return 2
    for var in ('AGENTD', 'AGENTCTL'):
        if not os.environ.get(var):
            sys.stderr.write('run.py: %s is not set\n' % var)
            return 2
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in sys.argv[1:]:
        suite.addTests(loader.loadTestsFromName(name[:-3] if name.endswith('.py')
                                                else name))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main())
