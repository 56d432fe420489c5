"""The shape of the code a newcomer reads: modules that share a name prefix live in a package, functions stay
short and take few parameters (options travel as named objects), and an import inside a function says why.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flexlearn"
MAX_LINES = 80
MAX_PARAMETERS = 8
# numba and the attitude kernels' two-compiler decorator: compiled signatures take flat scalars and arrays
COMPILED = re.compile(r"(^|\.)(njit\w*|jit|jitable|vectorize|generated_jit)$")


def _functions():
    for f in sorted(PACKAGE.rglob("*.py")):
        lines = f.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f.relative_to(ROOT), lines, node


def _decorator_names(node: ast.FunctionDef) -> list[str]:
    names = []
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        names.append(ast.unparse(d))
    return names


def parameter_count(node: ast.FunctionDef) -> int:
    """Parameters a caller passes: positional, keyword-only, ``*args`` and ``**kwargs``; not ``self``/``cls``."""
    a = node.args
    params = [*a.posonlyargs, *a.args]
    count = len(params) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
    return count - (1 if params and params[0].arg in ("self", "cls") else 0)


def test_sibling_modules_that_share_a_name_prefix_are_a_package():
    groups = defaultdict(list)
    for f in PACKAGE.rglob("*.py"):
        if f.stem != "__init__" and "_" in f.stem.strip("_"):
            groups[(f.parent, f.stem.strip("_").split("_")[0])].append(f.stem)
    crowded = [
        f"{d.relative_to(ROOT)}/{prefix}_*: {sorted(names)}" for (d, prefix), names in groups.items() if len(names) >= 3
    ]
    assert not crowded, "make these a package:\n" + "\n".join(crowded)


def test_functions_are_at_most_80_lines_unless_a_reason_stands_above():
    long = []
    for path, lines, node in _functions():
        length = node.end_lineno - node.lineno + 1
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        above = lines[first - 2].strip() if first >= 2 else ""
        if length > MAX_LINES and not above.startswith("# long:"):
            long.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "\n".join(long)


def test_functions_take_at_most_8_parameters_outside_compiled_kernels():
    many = [
        f"{path}:{node.lineno} {node.name} ({parameter_count(node)} parameters)"
        for path, _, node in _functions()
        if parameter_count(node) > MAX_PARAMETERS and not any(COMPILED.search(d) for d in _decorator_names(node))
    ]
    assert not many, "use an options object:\n" + "\n".join(many)


def _public_functions_with_parameters():
    """Public functions and methods (no ``_`` in their own or an enclosing class's name) that take parameters,
    except ``@overload`` stubs and property setters (their implementation or getter carries the docstring)."""

    def walk(node, path, public):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, path, public and not child.name.startswith("_"))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = _decorator_names(child)
                skip = "overload" in decorators or any(d.endswith(".setter") for d in decorators)
                if public and not child.name.startswith("_") and parameter_count(child) and not skip:
                    yield path, child

    for f in sorted(PACKAGE.rglob("*.py")):
        yield from walk(ast.parse(f.read_text(encoding="utf-8")), f.relative_to(ROOT), True)


def test_public_functions_document_their_arguments():
    """Google style: a public function's docstring has an ``Args:`` section (ruff's D417 then checks that it
    names every parameter)."""
    bare = [
        f"{path}:{node.lineno} {node.name}"
        for path, node in _public_functions_with_parameters()
        if "Args:" not in (ast.get_docstring(node) or "")
    ]
    assert not bare, "add an Args: section:\n" + "\n".join(bare)


def _import_blocks(node: ast.AST):
    """Runs of consecutive import statements inside ``node``'s statement lists (a block of imports)."""
    for child in ast.walk(node):
        for field in ("body", "orelse", "finalbody", "handlers"):
            statements = getattr(child, field, None)
            if not isinstance(statements, list):
                continue
            block: list[ast.stmt] = []
            for stmt in [*statements, None]:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    block.append(stmt)
                    continue
                if block:
                    yield block
                block = []


def test_an_import_inside_a_function_states_its_reason():
    """An optional dependency or a heavy import kept off the start-up path says so: a comment on one of the
    imports of its block, or on the line above the block."""
    silent = []
    for path, lines, node in _functions():
        for block in _import_blocks(node):
            text = lines[block[0].lineno - 2 : block[-1].end_lineno]
            if not any("#" in line for line in text):
                silent += [f"{path}:{imp.lineno} {lines[imp.lineno - 1].strip()}" for imp in block]
    assert not silent, "move to the top of the module, or say why it is here:\n" + "\n".join(sorted(set(silent)))


def test_the_checks_can_fail():
    tree = ast.parse("def f(a, b, c, d, e, f, g, h, i):\n    x = 1\n    import os\n    import sys\n")
    node = tree.body[0]
    assert parameter_count(node) == 9
    assert [[i.lineno for i in block] for block in _import_blocks(node)] == [[3, 4]]
    method = ast.parse("def m(self, a, *, b, **kw):\n    pass\n").body[0]
    assert parameter_count(method) == 3
