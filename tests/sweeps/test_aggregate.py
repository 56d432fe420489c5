"""flexlearn-aggregate on a synthetic multirun directory."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn.errors import ConfigError, DataError
from flexlearn.sweeps.aggregate import aggregate_multirun


def make_job(root: Path, num: int, overrides: list[str], metrics: dict | None) -> None:
    d = root / str(num)
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if metrics is not None:
        (d / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def multirun(tmp_path) -> Path:
    root = tmp_path / "multirun"
    for i, (noise, err) in enumerate([(1e-3, 0.004), (2e-3, 0.009), (4e-3, 0.02)]):
        make_job(root, i, [f"task.problem.slope_noise={noise}", "experiment=identify_modal_sim"],
                 {"id/EI_rel_err": err, "id/chi2_dof": 1.0 + i / 100, "id/not_identifiable": "", "output_dir": "x"})
    make_job(root, 10, ["task.problem.slope_noise=8e-3", "experiment=identify_modal_sim"], None)  # crashed job
    (root / "optimization_results.yaml").write_text("name: optuna\nbest_value: 0.004\n")
    return root


def test_table_statistics_and_figure(multirun, tmp_path):
    res = aggregate_multirun(multirun, y="id/EI_rel_err")
    rows = list(csv.DictReader(open(res["csv"])))
    assert [r["job"] for r in rows] == ["0", "1", "2", "10"]  # natural order of job numbers
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "missing"]
    assert float(rows[1]["task.problem.slope_noise"]) == 2e-3 and float(rows[1]["id/EI_rel_err"]) == 0.009
    assert "output_dir" not in rows[0]
    md = Path(res["markdown"]).read_text()
    assert "3 of 4 jobs finished" in md and "best_value: 0.004" in md
    mean = (0.004 + 0.009 + 0.02) / 3
    assert f"| id/EI_rel_err | 3 | {mean:.6g} |" in md
    assert Path(res["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert res["x"] == "task.problem.slope_noise"  # the first swept key that varies ("experiment" does not)


def test_command_line_writes_to_out_dir(multirun, tmp_path):
    out = tmp_path / "summary"
    proc = subprocess.run([sys.executable, "-m", "flexlearn.apps.aggregate", f"dir={multirun}", f"out={out}",
                           "metrics=[id/EI_rel_err]", "x=task.problem.slope_noise"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    header = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert header == ["job", "status", "task.problem.slope_noise", "experiment", "id/EI_rel_err"]
    assert (out / "summary.png").exists() and not (multirun / "summary.csv").exists()


def test_bad_inputs_name_the_directory_file_or_key(multirun, tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        aggregate_multirun(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no Hydra jobs"):
        aggregate_multirun(tmp_path / "empty")
    with pytest.raises(ConfigError, match="'y' = 'id/nothing'"):
        aggregate_multirun(multirun, y="id/nothing")
    (multirun / "1" / "metrics.json").write_text("{not json")
    with pytest.raises(DataError, match=r"1/metrics\.json"):
        aggregate_multirun(multirun)
    proc = subprocess.run([sys.executable, "-m", "flexlearn.apps.aggregate", f"dir={tmp_path / 'nowhere'}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr
