"""The package's layers (docs/architecture.md) as a test: imports point down, never up; no cycles; no
private name crosses a package boundary.

Every ``import flexlearn.x`` / ``from flexlearn.x import y`` is counted, also those inside functions.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flexlearn"

# Lower number = lower layer. A package may import its own layer or lower ones, never a higher one.
LAYERS = {
    "errors": 0, "atomic": 0, "config": 0, "tables": 0, "metrics": 0, "numba_cache": 0, "progress": 0,
    "fingerprint": 0, "parallel_compile": 0,
    "lie": 1,
    "physics": 2, "sensing": 2,
    "sim": 3, "models": 3,
    "data": 4, "ingest": 4, "runtime": 4, "viz": 4, "sweeps": 4,
    "tasks": 5, "identify": 5,
    "jobs": 6,
    "apps": 7,
}


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports() -> list[tuple[str, str, str, list[str]]]:
    """(file, importing package, imported module, imported names) for every flexlearn import."""
    out = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE.parent).with_suffix("")
        src = _package_of(".".join(rel.parts))
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flexlearn.") \
                    and node.level == 0:
                out.append((str(rel), src, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out += [(str(rel), src, a.name, []) for a in node.names if a.name.startswith("flexlearn.")]
    return out


def test_every_package_has_a_layer():
    packages = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
                if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


def test_imports_point_down():
    upward = [f"{f}: {src} (layer {LAYERS[src]}) imports {mod} (layer {LAYERS[_package_of(mod)]})"
              for f, src, mod, _ in _imports()
              if src and _package_of(mod) != src and LAYERS[_package_of(mod)] > LAYERS[src]]
    assert not upward, "\n".join(upward)


def test_package_graph_has_no_cycle():
    graph = defaultdict(set)
    for _, src, mod, _ in _imports():
        if src and _package_of(mod) != src:
            graph[src].add(_package_of(mod))
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt):] + [node, nxt])
                                     if nxt in path else f"import cycle through {node} -> {nxt}")
            if nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_no_private_name_crosses_a_package():
    crossing = [f"{f}: from {mod} import {name}" for f, src, mod, names in _imports() for name in names
                if _package_of(mod) != src and name.startswith("_") and not name.startswith("__")]
    crossing += [f"{f}: import {mod}" for f, src, mod, names in _imports()
                 if _package_of(mod) != src and any(p.startswith("_")
                                                    for p in mod.split(".")[1:])]
    assert not crossing, "\n".join(crossing)
