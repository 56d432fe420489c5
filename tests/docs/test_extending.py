"""The worked examples of docs/extending.md run as written: the ``python`` blocks of each numbered section
are executed in order, in one namespace per section (a failing assertion there is a failing example)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def sections() -> dict[str, list[str]]:
    """Section title -> its ``python`` code blocks, for the numbered ``## N.`` sections."""
    out: dict[str, list[str]] = {}
    title: str | None = None
    block: list[str] = []
    in_block = False
    for line in DOC.read_text().splitlines():
        if not in_block and line.startswith("## "):
            title = line[3:].strip()
        elif line.strip() == "```python":
            in_block, block = True, []
        elif in_block and line.strip() == "```":
            in_block = False
            if title is not None and re.match(r"\d+\.", title):
                out.setdefault(title, []).append("\n".join(block))
        elif in_block:
            block.append(line)
    return out


SECTIONS = sections()


def test_the_doc_has_the_three_examples_with_code() -> None:
    assert [t.split(".")[0] for t in SECTIONS] == ["1", "2", "3"], list(SECTIONS)
    for title in SECTIONS:
        assert re.search(r"\(library files touched: [^)]+\)", title), title


@pytest.mark.parametrize("title", list(SECTIONS), ids=[t.split(".")[0] for t in SECTIONS])
def test_example_runs(title: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_torch_thread: None) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"extending_{title.split('.')[0]}"}
    for i, code in enumerate(SECTIONS[title]):
        exec(compile(code, f"docs/extending.md [{title}, block {i + 1}]", "exec"), namespace)
