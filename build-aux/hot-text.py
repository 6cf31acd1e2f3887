#!/usr/bin/python3
"""build-aux/hot-text.py -- the list behind build-aux/hot-text.ld (see hot-text.sh).

  hot-text.py rules MAP LIST [CALLGRIND...] [--faults PERF_SCRIPT]
                             [--vm FAULTS ORDERED_MAP]

MAP is a GNU ld map of the release link, LIST the rules found so far (one a
line, may be missing). Adds to LIST the text input sections of the
functions callgrind saw run, of the instructions that faulted in `perf
script -F ip,addr,sym` outside .text.idle, and of those that faulted in a
VM (hot-text-vm.py's FAULTS, of the binary linked with ORDERED_MAP);
prints how many it added.

  hot-text.py write LIST MAP OUT

writes the linker script OUT, the rules in LIST in the link's own order.
"""
import re
import sys


def parse_map(path):
    """The map's text input sections: [section, file, start, size, [symbols]]."""
    sections, cur, pending, in_text = [], None, None, False
    for line in open(path, errors="replace"):
        if re.match(r"^\.text(\.idle)?\s", line) or line.rstrip() in (".text", ".text.idle"):
            in_text = True
            continue
        if in_text and re.match(r"^\.\S", line):
            in_text = False
            continue
        if not in_text:
            continue
        if pending is not None:
            m = re.match(r"\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*)$", line)
            if m:
                cur = [pending, m.group(3).strip(), int(m.group(1), 16), int(m.group(2), 16), []]
                sections.append(cur)
            pending = None
            continue
        m = re.match(r"^ (\.text\S*)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*)$", line)
        if m:
            cur = [m.group(1), m.group(4).strip(), int(m.group(2), 16), int(m.group(3), 16), []]
            sections.append(cur)
            continue
        m = re.match(r"^ (\.text\S*)\s*$", line)
        if m:
            pending = m.group(1)
            continue
        m = re.match(r"^\s+(0x[0-9a-f]+)\s+(\S+)\s*$", line)
        if m and cur is not None:
            cur[4].append(m.group(2))
    return [s for s in sections if s[3] > 0]


def rule(sec, path):
    """The linker script's pattern for one input section."""
    if sec.startswith(".text."):
        return "*(%s)" % sec
    # Assembly without a section of its own: its archive member, or its
    # object (the C runtime's start files).
    m = re.match(r".*/(lib[^/]+\.a)\((.+)\)$", path)
    if m:
        return "*%s:%s(%s)" % (m.group(1), m.group(2), sec)
    m = re.match(r".*/([^/()]+\.o)$", path)
    if m:
        return "*%s(%s)" % (m.group(1), sec)
    return None


def fetch_fault(ip, addr):
    """Whether a fault at addr by the instruction at ip was the fetch of
    that instruction: addr on its page (or the next, for one that spans
    two)."""
    return addr >> 12 in (ip >> 12, (ip >> 12) + 1)


def read_list(path):
    try:
        return [l.strip() for l in open(path) if l.strip()]
    except FileNotFoundError:
        return []


def cmd_rules(argv):
    mapfile, listfile, rest = argv[0], argv[1], argv[2:]
    faults = vm = None
    if "--vm" in rest:
        i = rest.index("--vm")
        vm, rest = rest[i + 1:i + 3], rest[:i] + rest[i + 3:]
    if "--faults" in rest:
        i = rest.index("--faults")
        faults, rest = rest[i + 1], rest[:i] + rest[i + 2:]
    sections = parse_map(mapfile)
    seen, addrs = set(), []
    for path in rest:
        for line in open(path, errors="replace"):
            m = re.match(r"c?fn=\(\d+\) (.+)", line)
            if not m:
                continue
            name = m.group(1).strip().split("'")[0]
            if name == "(below main)":
                name = "__libc_start_main"
            if re.match(r"0x[0-9a-f]+$", name):
                addrs.append(int(name, 16))
            seen.add(name)
    if faults:
        for line in open(faults, errors="replace"):
            f = line.split()
            if len(f) < 2:
                continue
            try:
                ip, addr = int(f[0], 16), int(f[1], 16)
            except ValueError:
                continue
            if fetch_fault(ip, addr) and len(f) >= 3:
                seen.add(f[2].split("+")[0])
    rules = read_list(listfile)
    added = 0
    if vm:
        added += vm_faults(vm[0], parse_map(vm[1]), rules)
    for sec, path, start, size, syms in sections:
        name = sec[len(".text."):] if sec.startswith(".text.") else ""
        if not ((name and name in seen) or any(s in seen for s in syms)
                or any(start <= a < start + size for a in addrs)):
            continue
        r = rule(sec, path)
        if r and r not in rules:
            rules.append(r)
            added += 1
    with open(listfile, "w") as f:
        f.write("".join(r + "\n" for r in rules))
    print(added)


def vm_faults(path, ordered, rules):
    """Add the sections of the instructions that faulted in the VM; how
    many were new."""
    base, faults, part = None, [], None
    for line in open(path, errors="replace"):
        if line.startswith("# "):
            part = line[2:].strip()
            continue
        f = line.split()
        if part == "maps" and len(f) >= 6 and f[5] == "/init" and f[2] == "00000000":
            base = int(f[0].split("-")[0], 16)
        elif part == "faults" and len(f) == 2:
            faults.append((int(f[0], 16), int(f[1], 16)))
    if base is None:
        raise SystemExit("hot-text.py: no /init mapping in " + path)
    added = 0
    for ip, addr in faults:
        if not fetch_fault(ip, addr):
            continue
        off = ip - base
        for sec, where, start, size, syms in ordered:
            if start <= off < start + size:
                r = rule(sec, where)
                if r and r not in rules:
                    rules.append(r)
                    added += 1
                break
    return added


def cmd_write(argv):
    listfile, mapfile, out = argv
    want = set(read_list(listfile))
    rules, total = [], 0
    for sec, path, start, size, syms in parse_map(mapfile):
        r = rule(sec, path)
        if r in want and r not in rules:
            rules.append(r)
            total += size
    with open(out, "w") as f:
        f.write("/* build-aux/hot-text.ld -- written by build-aux/hot-text.sh; do not edit.\n"
                " * The functions an idle agentd runs (start, listen, /healthz, a first\n"
                " * command), also as a VM's PID 1, first in\n"
                " * the release binary's text: %d input sections, %d bytes. */\n"
                % (len(rules), total))
        f.write("SECTIONS\n{\n  .text.idle :\n  {\n")
        f.write("".join("    %s\n" % r for r in rules))
        f.write("  }\n}\nINSERT BEFORE .text;\n")
    print("%d sections, %d bytes" % (len(rules), total))


if __name__ == "__main__":
    {"rules": cmd_rules, "write": cmd_write}[sys.argv[1]](sys.argv[2:])
