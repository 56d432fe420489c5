"""The printed parts of a run on their own: the config tree (rich or plain YAML), the metrics table, the last
line (the run directory), a multirun job's single line, and the automatic progress setting."""

from __future__ import annotations

import sys

import pytest
from omegaconf import OmegaConf

from flexlearn.apps import console

METRICS = {
    "test/ang_err_median_deg": 0.4091,
    "test/ang_err_p95_deg": 0.8192,
    "test/ang_err_rms_deg": 0.4641,
    "test/ang_err_mean_deg": 0.4163,
    "test/invalid_fraction": 0.0125,
    "test/n_samples": 144.0,
    "val/ang_err_median_deg": 0.3871,
    "output_dir": "/runs/x",
}


def test_metrics_table_lists_the_test_metrics():
    table = console.metrics_table(METRICS, "val/ang_err_median_deg").splitlines()
    assert table[0] == "test metrics (144 samples)"
    assert [ln.split()[0] for ln in table[1:6]] == ["median", "p95", "RMS", "mean", "invalid"]
    assert table[1].endswith("0.409°") and table[5].endswith("1.25 %")
    assert table[-1].split() == ["val/ang_err_median_deg", "0.3871"]


def test_metrics_table_of_an_identification_and_of_nothing():
    metrics = {"id/cost": 12.5, "id/EI": 74700.0, "id/EI_std": 294.0, "id/EI_rel_std": 0.0039, "id/EI_rel_err": 0.011}
    metrics |= {"id/m": 20.14, "id/m_std": 0.1, "id/m_identifiable": 0.0, "id/iterations": 9.0}
    table = console.metrics_table(metrics, "id/cost").splitlines()
    assert table[0] == "identification" and table[1].split() == ["id/cost", "12.5"]
    assert table[2].split()[:4] == ["EI", "74700", "±", "294"] and "(1.10 % from the truth)" in table[2]
    assert table[3].split()[:4] == ["m", "20.14", "±", "0.1"] and "not identifiable" in table[3]
    assert not any("iterations" in ln for ln in table)
    assert console.metrics_table({}) == ""


def test_show_result_ends_with_the_run_directory(capsys):
    console.show_result(METRICS, "val/ang_err_median_deg", figures="a.png in /runs/x/figures", exports="")
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2:] == ["run directory:", "/runs/x"]
    assert "figures: a.png in /runs/x/figures" in lines and not any(ln.startswith("exports") for ln in lines)


def test_show_result_prints_the_first_figures_before_the_table(capsys):
    """The main job leads with the held-out-module figure, then the training module's table."""
    console.show_result(METRICS, first={"held-out modules": "0.39° median", "held-out module figures": ""})
    lines = capsys.readouterr().out.splitlines()
    assert lines.index("held-out modules: 0.39° median") < lines.index("test metrics (144 samples)")
    assert not any(ln.startswith("held-out module figures") for ln in lines)


def test_multirun_job_prints_one_line(capsys, monkeypatch):
    monkeypatch.setattr(console, "job_label", lambda: "job 3")
    console.show_result(METRICS, "val/ang_err_median_deg")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("[job 3] median error 0.409°") and out[0].endswith("-> /runs/x")


def test_ranks_above_zero_print_nothing(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LOCAL_RANK", "1")
    console.show_result(METRICS)
    console.show_config(OmegaConf.create({"seed": 1}), tmp_path)
    assert capsys.readouterr().out == "" and not (tmp_path / "config_tree.txt").exists()


def test_config_tree_with_and_without_rich(monkeypatch):
    cfg = OmegaConf.create(
        {"seed": 7, "paths": {"root": "/r", "out": "${paths.root}/out"}, "data": {"batch_size": 64}, "hydra": {"x": 1}}
    )
    pytest.importorskip("rich")
    tree = console.config_tree(cfg)
    assert tree.startswith("CONFIG") and "/r/out" in tree and "batch_size: 64" in tree and "hydra" not in tree
    assert tree.index("data") < tree.index("paths") < tree.index("(top level)")
    assert "\x1b[" not in tree and "\x1b[" in console.config_tree(cfg, colour=True)
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.console", None)
    plain = console.config_tree(cfg)
    assert plain.startswith("# data\nbatch_size: 64\n# paths\n") and "out: /r/out" in plain
    assert OmegaConf.create("\n".join(ln for ln in plain.splitlines() if not ln.startswith("#")))


def test_config_tree_shows_a_missing_value_as_written():
    tree = console.config_tree(OmegaConf.create({"ckpt_path": "???", "paths": {"out": "${oc.env:NOPE_XYZ}"}}))
    assert "???" in tree and "NOPE_XYZ" in tree


def test_describe_files():
    assert console.describe_files({"b": "/d/b.png", "a": "/d/a.png"}) == "a.png, b.png in /d"
    assert console.describe_files(["/d/a.pt", "/e/b.pt"]) == "/d/a.pt, /e/b.pt"
    assert console.describe_files(None) == ""


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    from flexlearn.config import interactive

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert interactive() is False
    monkeypatch.setattr(sys, "stdout", Tty())
    assert interactive() is True
    monkeypatch.setattr("flexlearn.config.in_multirun", lambda: True)
    assert interactive() is False
