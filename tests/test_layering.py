"""The package's layers as a test: the layer map of docs/architecture.md is the one source; imports point down,
never up; no import circle between modules; no private name imported from another module.

Every import of a flexlearn module is counted: at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flexlearn"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def documented_layers() -> dict[str, int]:
    """Package (or top-level module) name → layer, read from the table under "## Layers" in docs/architecture.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for row in re.findall(r"^\| (\d+) \| ([^|]+) \|", section, flags=re.M):
        for name in re.findall(r"`([\w.]+)`", row[1]):
            assert name not in layers, f"docs/architecture.md names `{name}` twice in the layer table"
            layers[name] = int(row[0])
    return layers


LAYERS = documented_layers()


def module_names() -> dict[str, Path]:
    """Dotted name → file of every module of the package (a package is named by its ``__init__``)."""
    names = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = f
    return names


MODULES = module_names()


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _owner(name: str) -> str:
    """The module a dotted name lives in (``flexlearn.a.b.f`` → ``flexlearn.a.b``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports() -> list[tuple[str, str, str]]:
    """(importing module, imported module, imported name or "") for every flexlearn import, wherever it stands."""
    out = []
    for module, f in MODULES.items():
        is_package = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(parent + ([node.module] if node.module else []))
                if not base.startswith("flexlearn"):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in MODULES:
                        out.append((module, full, ""))
                    else:
                        out.append((module, _owner(base), alias.name))
            elif isinstance(node, ast.Import):
                out += [(module, _owner(a.name), "") for a in node.names if a.name.startswith("flexlearn")]
    return out


IMPORTS = imports()


def test_the_layer_map_names_every_package_and_only_existing_ones():
    packages = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert not packages - set(LAYERS), f"packages missing from docs/architecture.md: {sorted(packages - set(LAYERS))}"
    assert not set(LAYERS) - packages, (
        f"docs/architecture.md names packages that do not exist: {sorted(set(LAYERS) - packages)}"
    )


def test_imports_point_down():
    upward = [
        f"{src} (layer {LAYERS[_top(src)]}) imports {dst} (layer {LAYERS[_top(dst)]})"
        for src, dst, _ in IMPORTS
        if _top(src) and _top(dst) and _top(dst) != _top(src) and LAYERS[_top(dst)] > LAYERS[_top(src)]
    ]
    assert not upward, "\n".join(upward)


def import_circles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        if src != dst:
            graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def module_edges() -> list[tuple[str, str]]:
    """Module → module edges; importing ``a.b.c`` also runs the packages ``a.b`` and ``a`` (their ``__init__``),
    which count as edges only when they hold code beyond a docstring."""
    edges = []
    for src, dst, _ in IMPORTS:
        edges.append((src, dst))
        parent = dst.rsplit(".", 1)[0] if "." in dst else ""
        while parent and parent != "flexlearn":
            if not src.startswith(parent + ".") and src != parent and _has_code(parent):
                edges.append((src, parent))
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
    return edges


def _has_code(package: str) -> bool:
    f = MODULES[package]
    body = ast.parse(f.read_text(encoding="utf-8")).body
    return any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body)


def test_no_import_circle_between_modules():
    circles = import_circles(module_edges())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle():
    assert import_circles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert import_circles([("a", "b"), ("b", "c")]) == []


def test_no_private_name_is_imported_from_another_module():
    crossing = [
        f"{src}: from {dst} import {name}"
        for src, dst, name in IMPORTS
        if dst != src and name.startswith("_") and not name.startswith("__")
    ]
    crossing += [
        f"{src}: imports the private module {dst}"
        for src, dst, _ in IMPORTS
        if any(p.startswith("_") and not p.startswith("__") for p in dst.split(".")[1:])
    ]
    assert not crossing, "\n".join(crossing)


def private_attributes_across_files(sources: dict[str, str], inherited: set[str]) -> list[str]:
    """``self._name`` read in one file while ``_name`` is defined (a method, a class attribute or a ``self._name =``)
    only in other files: a private contract between the parts of a class split over files (a mixin and its host).
    ``inherited``: names a base outside flexlearn defines (``nn.Module._buffers``), which are not contracts of ours.
    """
    defined: dict[str, set[str]] = defaultdict(set)
    used: dict[str, set[str]] = defaultdict(set)
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        defined[item.name].add(path)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        defined[item.target.id].add(path)
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else []:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        defined[t.attr].add(path)
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                used[path].add(node.attr)
    return sorted(
        f"{path}: self.{name} (defined in {', '.join(sorted(defined[name]))})"
        for path, names in used.items()
        for name in names
        if name not in inherited and defined.get(name) and path not in defined[name]
    )


def test_no_private_attribute_is_a_contract_between_files():
    """A mixin and its host talk through public, documented methods (declared under ``TYPE_CHECKING`` where the
    mixin uses its host's), not through each other's private ones."""
    import torch

    inherited = set(dir(torch.nn.Module)) | set(vars(torch.nn.Module()))
    sources = {str(f.relative_to(ROOT)): f.read_text(encoding="utf-8") for f in sorted(PACKAGE.rglob("*.py"))}
    crossing = private_attributes_across_files(sources, inherited)
    assert not crossing, "make these public (with a docstring) or keep them in one file:\n" + "\n".join(crossing)


def test_the_private_attribute_check_finds_a_mixin_contract():
    host = "class Host(Mixin):\n    def _step(self):\n        return 1\n"
    mixin = "class Mixin:\n    def run(self):\n        return self._step() + self._own\n    _own: int\n"
    assert private_attributes_across_files({"host.py": host, "mixin.py": mixin}, set()) == [
        "mixin.py: self._step (defined in host.py)"
    ]
