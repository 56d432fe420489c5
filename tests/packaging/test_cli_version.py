"""`flexlearn --version` and the command list of the installed package."""

from __future__ import annotations

import pytest

import flexlearn
from flexlearn.apps.cli import commands, main


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"flexlearn {flexlearn.__version__}"


def test_command_list_names_every_console_script_with_a_summary(capsys):
    assert main([]) == 0
    listed = commands()
    assert {"flexlearn-pipeline", "flexlearn-train", "flexlearn-ingest", "flexlearn-cpr"} <= set(listed)
    assert all(listed.values()), listed
    out = capsys.readouterr().out
    assert "flexlearn-pipeline" in out


def test_every_command_summary_is_a_whole_sentence():
    """The list shows each command's first sentence whole: none cut at the end of a docstring line."""
    listed = commands()
    cut = {name: doc for name, doc in listed.items() if not doc.endswith(".")}
    assert not cut, cut
