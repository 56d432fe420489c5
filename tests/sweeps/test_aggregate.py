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
        make_job(
            root,
            i,
            [f"task.problem.slope_noise={noise}", "experiment=identify_modal_sim"],
            {"id/EI_rel_err": err, "id/chi2_dof": 1.0 + i / 100, "id/not_identifiable": "", "output_dir": "x"},
        )
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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flexlearn.apps.aggregate",
            f"dir={multirun}",
            f"out={out}",
            "metrics=[id/EI_rel_err]",
            "x=task.problem.slope_noise",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    header = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert header == ["job", "status", "task.problem.slope_noise", "experiment", "id/EI_rel_err"]
    assert (out / "summary.png").exists() and not (multirun / "summary.csv").exists()
    assert "no best run: the jobs record no optimized_metric" in proc.stdout


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
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.aggregate", f"dir={tmp_path / 'nowhere'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr


# ----------------------------------------------------------------------- the default figure of an Optuna-like sweep
@pytest.fixture
def optuna_like(tmp_path) -> Path:
    """12 jobs over lr (log-uniform), batch size and activation, each with its .hydra/config.yaml."""
    import math
    import random

    rnd = random.Random(3)
    root = tmp_path / "optuna"
    for i in range(12):
        lr = math.exp(rnd.uniform(math.log(3e-4), math.log(1e-2)))
        act, bs = rnd.choice(["silu", "tanh", "gelu"]), rnd.choice([128, 256, 512])
        err = 0.3 + abs(math.log10(lr / 3e-3)) + (0.1 if act == "tanh" else 0.0)
        make_job(
            root,
            i,
            [f"task.lr={lr}", f"data.batch_size={bs}", f"model.activation={act}"],
            {
                "status": "ok",
                "epochs": 40,
                "world_size": 1,
                "val/ang_err_median_deg": err,
                "test/ang_err_median_deg": 1.1 * err,
            },
        )
        (root / str(i) / ".hydra" / "config.yaml").write_text("optimized_metric: val/ang_err_median_deg\nseed: 7\n")
    return root


def test_default_figure_plots_the_optimised_metric_coloured_by_a_second_key(optuna_like):
    import matplotlib.image

    res = aggregate_multirun(optuna_like)
    assert res["y"] == "objective"  # the value returned to the sweeper, not 'epochs' (first in alphabetical order)
    assert all(r["objective"] == r["val/ang_err_median_deg"] for r in res["rows"])  # no best_score recorded
    assert res["x"] == "task.lr" and res["hue"] == "model.activation"  # a categorical second key as colour
    img = matplotlib.image.imread(res["figure"])
    assert img.shape[0] > 300 and img.shape[1] > 500


def test_default_y_without_a_recorded_optimised_metric_skips_bookkeeping(optuna_like):
    for cfg in optuna_like.glob("*/.hydra/config.yaml"):
        cfg.unlink()
    res = aggregate_multirun(optuna_like)
    assert res["y"] == "test/ang_err_median_deg"  # the first result, not epochs/world_size


def test_sweep_figure_axes(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from flexlearn.viz.sweep_figure import is_number, sweep_figure, wants_log

    assert wants_log("task.lr", [1e-3, 2e-3]) and wants_log("optimizer.learning_rate", [0.1, 0.2])
    assert wants_log("task.weight_decay", [1e-7, 1e-3]) and not wants_log("data.batch_size", [128, 1024])
    assert not wants_log("task.lr", [0.0, 1e-3]) and not is_number(True) and not is_number(float("nan"))
    jobs = [
        {"job": str(i), "task.lr": 10 ** (-4 + i / 3), "data.batch_size": 2 ** (7 + i % 3), "val/loss": 1.0 / (i + 1)}
        for i in range(8)
    ]
    assert sweep_figure(jobs, "task.lr", "val/loss", "data.batch_size", tmp_path / "a.png", "t").exists()
    assert sweep_figure(jobs, "data.batch_size", "val/loss", None, tmp_path / "b.png", "t").exists()
    assert sweep_figure(jobs, "job", "val/loss", "task.lr", tmp_path / "c.png", "t", others=["x"]).exists()


@pytest.mark.parametrize(
    "jobs",
    [
        [{"job": "0", "lr": 0.1, "m": 1.0}],  # one job
        [{"job": str(i), "lr": 0.1, "m": 2.0} for i in range(3)],  # nothing varies
        [{"job": str(i), "lr": ["a", "b", "c"][i], "m": float(i)} for i in range(3)],  # categorical x, zero y
        [{"job": str(i), "lr": 0.1 * (i + 1), "m": -1.0 * i} for i in range(3)],  # negative y: linear axis
    ],
)
def test_sweep_figure_of_degenerate_sweeps(tmp_path, jobs):
    from flexlearn.viz.sweep_figure import sweep_figure

    assert sweep_figure(jobs, "lr", "m", None, tmp_path / "f.png", "t").read_bytes()[:4] == b"\x89PNG"


def test_sweep_figure_without_numeric_metric_is_none(tmp_path):
    from flexlearn.viz.sweep_figure import sweep_figure

    jobs = [{"job": "0", "lr": 0.1, "m": float("nan")}, {"job": "1", "lr": 0.2, "m": "x"}]
    assert sweep_figure(jobs, "lr", "m", None, tmp_path / "f.png", "t") is None
    assert not (tmp_path / "f.png").exists()


def test_an_out_dir_of_the_users_own_is_refused_and_kept(multirun, tmp_path):
    """``out=`` a folder that flexlearn did not write (here with the user's own summary.csv in it) had its files
    overwritten; it is refused before anything is read, unchanged. A new folder, or the multirun itself, is fine."""
    from flexlearn.atomic import OutputPathError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.csv").write_text("my own table\n")
    with pytest.raises(OutputPathError, match="did not write"):
        aggregate_multirun(multirun, mine)
    assert [p.name for p in mine.iterdir()] == ["summary.csv"]
    assert (mine / "summary.csv").read_text() == "my own table\n"
    with pytest.raises(OutputPathError, match="input"):
        aggregate_multirun(multirun, tmp_path)  # contains the multirun
    assert Path(aggregate_multirun(multirun, multirun)["csv"]) == multirun / "summary.csv"
    res = aggregate_multirun(multirun, tmp_path / "new")
    assert Path(res["csv"]).parent == tmp_path / "new"
    assert aggregate_multirun(multirun, tmp_path / "new")["n_jobs"] == 4  # its own folder is written again


# ----------------------------------------------------------------------------------------------- the best run
def test_best_run_is_the_best_checkpoints_score_and_is_marked(optuna_like):
    """The objective is ``best_score`` (the best checkpoint's metric, what the sweeper received) where a job records
    it, not the last epoch's value; the best job is named with its directory and checkpoint, first in summary.md."""
    for i in range(12):
        m = json.loads((optuna_like / str(i) / "metrics.json").read_text())
        # the last epoch got worse than the best checkpoint, by a different amount per job: job 5 has the best
        m.update(best_score=m["val/ang_err_median_deg"] - (0.5 if i == 5 else 0.0), best_ckpt=f"/ckpt/{i}/best.ckpt")
        (optuna_like / str(i) / "metrics.json").write_text(json.dumps(m))
    res = aggregate_multirun(optuna_like)
    best = res["best"]
    scores = {r["job"]: r["objective"] for r in res["rows"]}
    assert best["job"] == min(scores, key=scores.get) and best["value"] == min(scores.values())
    assert best["checkpoint"] == f"/ckpt/{best['job']}/best.ckpt" and best["dir"] == str(optuna_like / best["job"])
    assert set(best["overrides"]) == {"task.lr", "data.batch_size", "model.activation"}
    header = Path(res["csv"]).read_text().splitlines()[0].split(",")
    assert header[:6] == ["job", "status", "task.lr", "data.batch_size", "model.activation", "objective"]
    assert header[6] == "val/ang_err_median_deg"
    md = Path(res["markdown"]).read_text()
    assert md.index(f"## Best run: job {best['job']}") < md.index("## Jobs")
    assert f"| **{best['job']} (best)** | ok |" in md and f"checkpoint: /ckpt/{best['job']}/best.ckpt" in md
    table = md[md.index("## Jobs") : md.index("## Metrics")]
    assert table.splitlines()[2] == "| job | status | task.lr | data.batch_size | model.activation | objective |"


def test_best_run_follows_the_sweepers_direction_and_skips_unfinished(optuna_like):
    (optuna_like / "multirun.yaml").write_text("hydra:\n  sweeper:\n    direction: maximize\n")
    (optuna_like / "3" / "metrics.json").write_text(json.dumps({"status": "ok", "val/ang_err_median_deg": 1e9}))
    (optuna_like / "4" / "metrics.json").unlink()
    res = aggregate_multirun(optuna_like)
    assert res["best"]["job"] == "3" and res["best"]["direction"] == "maximize"
    from flexlearn.sweeps.aggregate import best_run_lines

    lines = best_run_lines(res)
    assert lines[0] == "sweep: 11 of 12 jobs finished" and lines[1] == "  no metrics.json: failed or stopped: job 4"
    assert lines[2].startswith("best run: job 3 (") and "val/ang_err_median_deg = 1e+09" in lines[2]
    assert lines[3] == f"  directory:  {optuna_like / '3'}" and lines[4] == "  checkpoint: none written"


def test_no_best_run_without_a_finite_objective(optuna_like):
    for i in range(12):
        (optuna_like / str(i) / "metrics.json").write_text(
            json.dumps({"status": "diverged", "val/ang_err_median_deg": "inf"})
        )
    res = aggregate_multirun(optuna_like)
    assert res["best"] is None
    from flexlearn.sweeps.aggregate import best_run_lines

    lines = best_run_lines(res)
    assert lines[1] == "  status diverged: job 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11" and "no best run" in lines[2]
