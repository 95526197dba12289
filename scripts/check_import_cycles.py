"""No import cycle among the modules of a package, lazy imports (inside functions) included.

    python scripts/check_import_cycles.py [PACKAGE ...]      (default: analyzer; .ci/run runs it)

import-linter's `acyclic_siblings` contract (pyproject.toml) finds cycles BETWEEN the children of each package; this
finds every module-level cycle, those that run through a package's own __init__ too (analyzer.diff/__init__ →
analyzer.diff.core → analyzer.diff). grimp reads every import statement, so an import moved into a function to dodge
a circular import at load time is still one. Prints one block per cycle (its modules and the imports that close it,
with their lines) and exits 1; prints a one-line all-clear and exits 0 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def cycles(graph, packages: list[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted; sorted."""
    mods = sorted(m for m in graph.modules if m.split(".")[0] in packages)
    inside = set(mods)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in mods:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def describe(graph, comp: list[str]) -> list[str]:
    """The imports between the modules of one cycle: 'a -> b (line 12)'."""
    members = set(comp)
    lines = []
    for a in comp:
        for b in sorted(graph.find_modules_directly_imported_by(a) & members):
            at = sorted({d["line_number"] for d in graph.get_import_details(importer=a, imported=b)})
            lines.append(f"  {a} -> {b} (line {', '.join(map(str, at))})")
    return lines


def main(argv: list[str]) -> int:
    packages = argv or ["analyzer"]
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(*packages, cache_dir=None)
    found = cycles(graph, packages)
    for comp in found:
        print(f"import cycle among {len(comp)} modules: {', '.join(comp)}")
        print("\n".join(describe(graph, comp)))
    if found:
        return 1
    n = sum(1 for m in graph.modules if m.split(".")[0] in packages)
    print(f"no import cycle among the {n} modules of {', '.join(packages)} (lazy imports included)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
