#!/usr/bin/env python3
"""test_no_cycles: the modules include one another without loops.

A module is a .c file and its .h (common/bus/wire.c + wire.h is "common/bus/wire"). Module A
depends on module B when A's .c or .h includes B's header ("b.h", resolved in A's own
directory, then in common/*/ and proto/ as the build's include path does). The graph must
have no cycle: each layer includes only what is below it. Exits 1 naming every cycle.

   usage: test_no_cycles.py SOURCE_DIR [--known A,B,...]...
--known names a loop that is known and not yet layered (exactly those modules): it is
reported, not failed; any other loop fails, and so does a known one that grew."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    found = {}
    for top in ("common", "services", "proto"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(d, f), root)
                    found.setdefault(rel[:-2], []).append(rel)
    return found


def resolve(root, module, header, known):
    here = os.path.dirname(module)
    candidates = [os.path.join(here, header)]
    for d in sorted(os.listdir(os.path.join(root, "common"))):
        candidates.append(os.path.join("common", d, header))
    candidates.append(os.path.join("proto", header))
    for c in candidates:
        if c.endswith(".h") and c[:-2] in known and os.path.exists(os.path.join(root, c)):
            return c[:-2]
    return None


def main():
    root = sys.argv[1]
    known = [sorted(a.split(",")) for i, a in enumerate(sys.argv)
             if i > 1 and sys.argv[i - 1] == "--known"]
    mods = modules(root)
    graph = {}
    for m, files in mods.items():
        deps = set()
        for f in files:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                for h in INCLUDE.findall(fh.read()):
                    target = resolve(root, m, h, mods)
                    if target is not None and target != m:
                        deps.add(target)
        graph[m] = deps
    # Tarjan's strongly connected components: every one of more than a module is a loop.
    index, low, stack, on, loops, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    failed = 0
    for loop in loops:
        if loop in known:
            print("known loop, not yet layered: %s" % ", ".join(loop))
        else:
            print("FAIL: these modules include one another in a loop: %s" % ", ".join(loop))
            failed += 1
    if failed:
        return 1
    print("ok: %d modules, no loop but the known ones" % len(graph))
    return 0


if __name__ == "__main__":
    sys.exit(main())
