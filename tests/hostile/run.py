"""Runs hostile-client test modules with unittest (verbosity 2).

Usage: AGENTD=path/to/agentd python3 run.py test_slowloris [...]
The integration harness (tests/integration/harness.py) is imported from
beside this folder. Exits non-zero when a test fails or errors.
"""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), 'integration'))
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
    return 0 if result.wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main())
