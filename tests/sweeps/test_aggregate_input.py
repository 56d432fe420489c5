"""A job's ``.hydra/overrides.yaml`` that is not a list of strings: a `DataError` naming the file and the value
(flexlearn-aggregate: one line, exit status 2), not a TypeError traceback nor keys read from a mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexlearn.errors import DataError
from flexlearn.sweeps.aggregate import aggregate_multirun, collect_jobs
from tests.data.console import assert_clean_failure, run_console


def make_multirun(root: Path, overrides_text: str) -> Path:
    """Two finished jobs; job 1's overrides.yaml holds ``overrides_text``. Returns that file."""
    for num, text in enumerate(["- lr=0.1\n", overrides_text]):
        d = root / str(num)
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(text)
        (d / "metrics.json").write_text(json.dumps({"val/loss": 0.5 + num}))
    return root / "1" / ".hydra" / "overrides.yaml"


@pytest.mark.parametrize(
    "text, needles",
    [
        ("5\n", ("holds the integer 5", "expected a list of override strings")),
        ("lr: 0.1\n", ("holds the mapping {'lr': 0.1}",)),
        ("just text\n", ("holds the string 'just text'",)),
        ("- lr=0.2\n- 7\n", ("item 1 is the integer 7", "expected an override string")),
        ("- {lr: 0.2}\n", ("item 0 is the mapping",)),
    ],
)
def test_overrides_that_are_not_a_list_of_strings_are_named(tmp_path, text, needles):
    bad = make_multirun(tmp_path / "multirun", text)
    with pytest.raises(DataError) as info:
        collect_jobs(tmp_path / "multirun")
    message = str(info.value)
    assert "\n" not in message and f"file '{bad}'" in message
    for n in needles:
        assert n in message, message


def test_empty_overrides_file_means_no_overrides(tmp_path):
    make_multirun(tmp_path / "multirun", "")
    res = aggregate_multirun(tmp_path / "multirun", tmp_path / "out")
    assert res["n_jobs"] == 2 and res["rows"][1]["lr"] is None and res["rows"][0]["lr"] == 0.1


def test_invalid_yaml_is_named_on_one_line(tmp_path):
    bad = make_multirun(tmp_path / "multirun", "- [unclosed\n- x: {\n")
    with pytest.raises(DataError) as info:
        collect_jobs(tmp_path / "multirun")
    assert "\n" not in str(info.value) and f"file '{bad}': not valid YAML" in str(info.value)


def test_aggregate_command_names_a_plain_number(tmp_path):
    """Class 2 through the console command: a TypeError traceback and exit 1 before."""
    bad = make_multirun(tmp_path / "multirun", "42\n")
    proc = run_console("flexlearn-aggregate", tmp_path, f"dir={tmp_path / 'multirun'}", f"out={tmp_path / 'out'}")
    assert_clean_failure(proc, str(bad), "holds the integer 42")
