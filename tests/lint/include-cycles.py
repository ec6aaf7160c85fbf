#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint: no import cycle among the modules of a C source directory.

usage: include-cycles.py [--graph] DIR [DIR...]

Each DIR is checked on its own. A module is foo.c plus foo.h (either may be
missing); a module split over several files keeps them together: foo_x.c
without a foo_x.h of its own, and foo_int.h without a foo_int.c, belong to
module foo. The module graph has an edge A -> B when

  - a file of A has #include "B.h" (the include graph), or
  - a file of A names a function or variable that a .c file of B defines
    without "static" (the call graph: a module that calls another through
    a catch-all header depends on it all the same).

Any cycle in that graph fails the check, printed with the line or symbol
behind each edge. So does a header that declares a function defined in a
different module's .c (one header per module: foo.h declares what foo.c
exports). Comments and string literals are ignored; definitions are found
the way this code base writes them (return type and name starting at
column 0).

--graph also prints each module's edges (A -> B, C), bottom layer first.

Exit status: 0 clean, 1 a cycle or a misplaced declaration (printed),
2 usage error.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
# A function definition at column 0: type words, name, (args), then "{".
FUNC_DEF = re.compile(
    r'^(?!static\b|typedef\b|extern\b|struct\b[^(;]*\{|#)'
    r'[A-Za-z_][\w \t*]*?[\s*](\w+)[ \t]*\(([^;{}()]|\([^()]*\))*\)\s*\{',
    re.M)
# A global variable definition at column 0: "type name[...] = " or ";".
VAR_DEF = re.compile(
    r'^(?!static\b|typedef\b|extern\b|#|return\b)'
    r'(?:const[ \t]+)?(?:struct[ \t]+|enum[ \t]+|unsigned[ \t]+)?\w+'
    r'[\s*]+(?:const[ \t]+)?(\w+)[ \t]*(?:\[[^\]]*\])?[ \t]*(?:=|;)',
    re.M)
# A function declaration at column 0 in a header.
FUNC_DECL = re.compile(
    r'^(?!static\b|typedef\b|#)'
    r'[A-Za-z_][\w \t*]*?[\s*](\w+)[ \t]*\(([^;{}()]|\([^()]*\))*\)\s*;',
    re.M)
EXTERN_DECL = re.compile(r'^extern\b[^;(]*?\b(\w+)[ \t]*(?:\[[^\]]*\])?;',
                         re.M)
IDENT = re.compile(r'\b[A-Za-z_]\w*\b')
KEYWORDS = {'if', 'while', 'for', 'switch', 'return', 'sizeof', 'else'}


def strip(text):
    """Blanks out comments and string/char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def module_of(base, exts):
    """The module a file base belongs to (see the docstring)."""
    if '.c' in exts.get(base, ()) and '.h' in exts.get(base, ()):
        return base
    parts = base.split('_')
    for i in range(len(parts) - 1, 0, -1):
        prefix = '_'.join(parts[:i])
        if prefix in exts:
            return prefix
    return base


def line_of(text, pos):
    return text.count('\n', 0, pos) + 1


class Module:
    def __init__(self, name):
        self.name = name
        # (path, raw text, text without comments/strings/declarations,
        # file name)
        self.files = []
        self.defs = set()
        self.decls = {}  # header declarations: name -> (path, line)


def load(directory):
    exts = {}
    for fn in sorted(os.listdir(directory)):
        base, ext = os.path.splitext(fn)
        if ext in ('.c', '.h'):
            exts.setdefault(base, set()).add(ext)
    mods = {}
    for base in sorted(exts):
        m = mods.setdefault(module_of(base, exts),
                            Module(module_of(base, exts)))
        for ext in sorted(exts[base]):
            path = os.path.join(directory, base + ext)
            with open(path, encoding='utf-8', errors='replace') as f:
                raw = f.read()
            text = strip(raw)
            uses = text
            if ext == '.h':
                # A declaration is not a use: the check below flags a
                # header declaring another module's function.
                for rx in (FUNC_DECL, EXTERN_DECL):
                    for mt in rx.finditer(text):
                        m.decls[mt.group(1)] = (path,
                                                line_of(text, mt.start()))
                    uses = rx.sub(lambda mt: re.sub(r'[^\n]', ' ',
                                                    mt.group(0)), uses)
            else:
                for rx in (FUNC_DEF, VAR_DEF):
                    for mt in rx.finditer(text):
                        if mt.group(1) not in KEYWORDS:
                            m.defs.add(mt.group(1))
            m.files.append((path, raw, uses, base + ext))
    return mods


def edges_of(mods):
    """{A: {B: reason}} over the modules of one directory."""
    owner = {}
    for m in mods.values():
        for d in m.defs:
            owner.setdefault(d, m.name)
    graph = {name: {} for name in mods}
    file_module = {fn: m.name for m in mods.values()
                   for _, _, _, fn in m.files if fn.endswith('.h')}
    for m in mods.values():
        for path, raw, text, _ in m.files:
            for mt in INCLUDE.finditer(raw):
                inc = os.path.basename(mt.group(1))
                target = file_module.get(inc)
                if target and target != m.name:
                    graph[m.name].setdefault(
                        target, '%s:%d includes "%s"' % (
                            path, line_of(raw, mt.start()), mt.group(1)))
            for mt in IDENT.finditer(text):
                o = owner.get(mt.group(0))
                if o and o != m.name:
                    graph[m.name].setdefault(
                        o, '%s:%d uses %s() defined in module %s' % (
                            path, line_of(text, mt.start()), mt.group(0), o))
    return graph


def cycles(graph):
    """One cycle (a list of nodes) per strongly connected component."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

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
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append((comp, cycle_in(graph, set(comp))))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycle_in(graph, comp):
    """A shortest cycle through the smallest-named node of comp."""
    start = min(comp)
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start, start]


def print_graph(graph):
    """Modules in layers: a module's layer is one above its highest edge."""
    layer = {}

    def depth(v, seen=()):
        if v not in layer:
            if v in seen:
                return 0
            layer[v] = 1 + max([depth(w, seen + (v,)) for w in graph[v]],
                               default=-1)
        return layer[v]

    for v in graph:
        depth(v)
    for v in sorted(graph, key=lambda x: (layer[x], x)):
        print('  [%d] %s -> %s' % (layer[v], v,
                                   ', '.join(sorted(graph[v])) or '-'))


def check(directory, show=False):
    mods = load(directory)
    graph = edges_of(mods)
    if show:
        print_graph(graph)
    bad = 0
    owner = {}
    for m in mods.values():
        for d in m.defs:
            owner.setdefault(d, m.name)
    for m in sorted(mods.values(), key=lambda x: x.name):
        for name, (path, line) in sorted(m.decls.items()):
            o = owner.get(name)
            if o and o != m.name:
                print('%s:%d: declares %s, defined in module %s (one '
                      'header per module)' % (path, line, name, o))
                bad += 1
    for comp, cyc in cycles(graph):
        print('%s: include cycle: %s' % (directory, ' -> '.join(cyc)))
        if len(comp) > len(cyc) - 1:
            print('    (in a cycle together: %s)' % ', '.join(sorted(comp)))
        for a, b in zip(cyc, cyc[1:]):
            print('    %s -> %s: %s' % (a, b, graph[a][b]))
        bad += 1
    if not bad:
        print('%s: %d modules, no cycle' % (directory, len(mods)))
    return bad


def main(argv):
    if len(argv) < 2 or argv[1] in ('-h', '--help'):
        print(__doc__.strip().splitlines()[2])
        return 2
    show = argv[1] == '--graph'
    dirs = argv[2:] if show else argv[1:]
    if not dirs:
        print(__doc__.strip().splitlines()[2])
        return 2
    bad = 0
    for d in dirs:
        if not os.path.isdir(d):
            print('include-cycles: %s: not a directory' % d)
            return 2
        bad += check(d, show)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
