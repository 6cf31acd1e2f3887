#!/usr/bin/python3
"""Checks that every relative link of the docs resolves.

Usage:
    doclinks.py ROOT            every *.md of a checkout (README.md, API.md,
                                HARDENING.md, docs/, ...) but build*/, .*/
                                and node_modules/
    doclinks.py FILE.md ...     those files
    doclinks.py --self-test     a broken link in a scratch folder must fail

A link is [text](target) or an image's ![text](target), outside code. Links
with a scheme (https:, mailto:) are not followed. A target must name a file or
folder that exists, relative to the file that links it; a #anchor (alone, or
after a .md file) must be the slug of a heading in that file, by GitHub's rules.
Prints one line per broken link, FILE:LINE: ..., and exits 1 if there is one,
0 if none, 2 on a usage error. Standard library only.
"""

import os
import re
import subprocess
import sys
import tempfile

LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?'
                  r'(?:\s+"[^"]*")?\s*\)')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
ANCHOR_TAG = re.compile(r'<a\s+(?:name|id)="([^"]+)"')


def prose_lines(path, keep_code=False):
    """Yields (line number, text) of a file's lines outside fenced code,
    with inline code spans blanked unless keep_code."""
    fence = None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1) == fence:
                    fence = None
                continue
            if fence is None:
                yield n, line if keep_code else re.sub(r'(`+).*?\1', '', line)


def slug(text):
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)   # links: text
    text = re.sub(r'<[^>]+>', '', text)                     # html tags
    text = text.replace('`', '').strip().lower()
    text = ''.join(c for c in text
                   if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def anchors(path, cache={}):
    """The anchors of a markdown file: its headings' slugs, duplicates
    numbered -1, -2 as GitHub does, and <a name|id="...">."""
    if path not in cache:
        seen, out = {}, set()
        for _, line in prose_lines(path, True):
            out.update(ANCHOR_TAG.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            if s in seen:
                seen[s] += 1
                out.add('%s-%d' % (s, seen[s]))
            else:
                seen[s] = 0
                out.add(s)
        cache[path] = out
    return cache[path]


def check_file(path):
    """The broken links of one file, as messages."""
    bad = []
    for n, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                continue
            where, _, anchor = target.partition('#')
            dest = path
            if where:
                dest = os.path.normpath(os.path.join(
                    os.path.dirname(path), where))
                if not os.path.exists(dest):
                    bad.append('%s:%d: %s: no such file' % (path, n, target))
                    continue
            if anchor and dest.endswith('.md') and os.path.isfile(dest):
                if anchor not in anchors(dest):
                    bad.append('%s:%d: %s: no heading "%s" in %s' %
                               (path, n, target, anchor, dest))
    return bad


def docs_of(root):
    """The markdown files of a checkout, build folders, hidden folders and
    node_modules left out."""
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(('.', 'build'))
                         and x != 'node_modules')
        files += [os.path.join(d, n) for n in sorted(names)
                  if n.endswith('.md')]
    return files


def self_test():
    """A good file passes; each kind of broken link fails, with its line."""
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, 'docs'))
        with open(os.path.join(d, 'README.md'), 'w') as f:
            f.write('# Top\n\n## The `API` in brief (v1)\n\n## Top\n\n'
                    'See [a](docs/a.md#part-two), [b](#the-api-in-brief-v1), '
                    '[c](#top-1), [web](https://example.org/x#y) and '
                    '[folder](docs).\n\n```\n[not a link](nowhere.md)\n```\n'
                    'Code: `[nor](this.md)`.\n')
        with open(os.path.join(d, 'docs', 'a.md'), 'w') as f:
            f.write('# A\n\n## Part two\n\nBack to [top](../README.md#top).\n')
        cases = [
            ('', 0, None),
            ('[x](../missing.md)\n', 1, 'missing.md: no such file'),
            ('[x](a.md#part-three)\n', 1, 'no heading "part-three"'),
            ('[x](#top-2)\n', 1, 'no heading "top-2"'),
        ]
        for extra, want, says in cases:
            with open(os.path.join(d, 'docs', 'b.md'), 'w') as f:
                f.write('# B\n\nline two\n' + extra)
            p = subprocess.run([sys.executable, me, d], capture_output=True,
                               text=True)
            if p.returncode != want or (says and (
                    says not in p.stdout or 'b.md:4:' not in p.stdout)):
                sys.stderr.write('self-test: %r: exit %d, wanted %d:\n%s%s' %
                                 (extra, p.returncode, want, p.stdout,
                                  p.stderr))
                return 1
    print('self-test: ok')
    return 0


def main(args):
    if args == ['--self-test']:
        return self_test()
    if not args or any(a.startswith('-') for a in args):
        sys.stderr.write(__doc__)
        return 2
    files = []
    for a in args:
        files += docs_of(a) if os.path.isdir(a) else [a]
    bad = []
    for path in files:
        bad += check_file(path)
    for line in bad:
        print(line)
    print('%d files, %d broken links' % (len(files), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
