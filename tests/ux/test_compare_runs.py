"""`flexlearn-compare`: runs written the way Lightning and a run write them, a sweep folder, a real training run,
and bad input (exit 2, one line naming the path)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from flexlearn.apps.compare import main
from flexlearn.jobs.compare import compare_runs, differing_keys, find_runs, load_run


def fake_run(
    d: Path, lr: float, val: list[float], best_epoch: int, mode: str = "min", batch: int = 64, old_name: bool = False
) -> Path:
    """A run directory as a training run leaves it: config.yaml, metrics.json, csv/metrics.csv (Lightning).
    ``best_epoch``: counted from 1; the checkpoint is named as training names it (``best-epoch002-of004.ckpt``), or
    with ``old_name`` as it was named before (``best-epoch001.ckpt``, Lightning's 0-based index)."""
    (d / "csv").mkdir(parents=True)
    cfg = {
        "task": {"lr": lr},
        "data": {"batch_size": batch},
        "paths": {"output_dir": str(d)},
        "callbacks": {"model_checkpoint": {"monitor": "val/ang_err_median_deg", "mode": mode, "dirpath": str(d)}},
        "run": {"name": d.name},
    }
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    best = (min if mode == "min" else max)(val)
    name = f"best-epoch{best_epoch - 1:03d}" if old_name else f"best-epoch{best_epoch:03d}-of{len(val):03d}"
    metrics = {"best_score": best, "best_ckpt": f"/ckpts/{d.name}/{name}.ckpt", "status": "ok"}
    metrics |= {"test/cap/ang_err_median_deg": best * 1.1, "test/ang_err_p95_deg": None, "epochs": len(val)}
    (d / "metrics.json").write_text(json.dumps(metrics))
    with open(d / "csv" / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "step", "train/loss", "val/ang_err_median_deg", "val/loss"])
        for e, v in enumerate(val):
            w.writerow([e, 10 * e + 9, "", v, v / 100])
            w.writerow([e, 10 * e + 9, 1.0 / (e + 1), "", ""])
    return d


def test_compare_names_the_differing_keys_and_the_best_run(tmp_path):
    a = fake_run(tmp_path / "runs" / "a", 1e-3, [9.0, 5.0, 4.0, 4.5], best_epoch=3)
    b = fake_run(tmp_path / "runs" / "b", 3e-3, [8.0, 3.0, 2.5, 2.7], best_epoch=3)
    c = fake_run(tmp_path / "runs" / "c", 1e-2, [7.0, 6.0, 6.5, 6.8], best_epoch=2)
    s = compare_runs([tmp_path / "runs"], tmp_path / "out")
    assert s["differing_keys"] == ["task.lr"]  # paths, dirpath and run bookkeeping differ too but are left out
    assert s["best_run"] == str(b) and s["best_objective"] == 2.5
    assert s["best_checkpoint"].endswith("b/best-epoch003-of004.ckpt")
    assert s["runs"] == [str(b), str(a), str(c)]
    table = (tmp_path / "out" / "compare.md").read_text().splitlines()
    assert table[0].split("|")[3].strip() == "task.lr" and "**best**" in table[2] and "`" + str(b) in table[2]
    assert "| – |" in table[2]  # a null metric is a dash, not 'None' or 'nan'
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["best_run"] == str(b)
    for png in ("compare_curves.png", "compare_test.png"):
        assert (tmp_path / "out" / png).read_bytes()[:4] == b"\x89PNG"


def test_mode_max_and_unfinished_runs(tmp_path):
    hi = fake_run(tmp_path / "hi", 1e-3, [0.5, 0.9], best_epoch=2, mode="max")
    lo = fake_run(tmp_path / "lo", 2e-3, [0.4, 0.6], best_epoch=2, mode="max")
    unfinished = tmp_path / "u"
    (unfinished / "csv").mkdir(parents=True)
    (unfinished / "csv" / "metrics.csv").write_text("epoch,step,val/ang_err_median_deg\n0,9,3.0\n")
    s = compare_runs([lo, hi, unfinished], tmp_path / "o")
    assert s["best_run"] == str(hi) and s["runs"][-1] == str(unfinished)


def test_sweep_folder_is_expanded_in_job_order(tmp_path):
    sweep = tmp_path / "multiruns" / "2026-01-01_00-00-00"
    for k in (10, 2, 1):
        fake_run(sweep / str(k), 1e-3 * (k + 1), [5.0 - 0.1 * k], best_epoch=1, batch=32 * k)
    assert [p.name for p in find_runs([tmp_path / "multiruns"])] == ["1", "2", "10"]
    runs = [load_run(p) for p in find_runs([sweep])]
    assert differing_keys(runs) == ["data.batch_size", "task.lr"]


def _circles(fig) -> dict[str, list[tuple[float, float]]]:
    """(x, y) of the best-checkpoint circles per panel title."""
    out: dict[str, list[tuple[float, float]]] = {}
    for ax in fig.axes:
        for ln in ax.get_lines():
            if ln.get_marker() == "o":
                out.setdefault(ax.get_title(), []).append((float(ln.get_xdata()[0]), float(ln.get_ydata()[0])))
    return out


@pytest.mark.parametrize("old_name", [False, True])
def test_circles_sit_at_the_best_epoch_for_new_and_old_checkpoint_names(tmp_path, old_name):
    from flexlearn.viz.run_comparison import curves_figure

    a = load_run(fake_run(tmp_path / "a", 1e-3, [9.0, 5.0, 4.0, 4.5], best_epoch=3, old_name=old_name))
    b = load_run(fake_run(tmp_path / "b", 3e-3, [8.0, 3.0, 3.5, 3.7], best_epoch=2, old_name=old_name))
    assert (a.best_epoch, b.best_epoch) == (3, 2)
    a.label, b.label = "a", "b"
    circles = _circles(curves_figure([a, b], ["val/ang_err_median_deg"]))
    assert circles == {"val median angular error [deg]": [(3.0, 4.0), (2.0, 3.0)]}  # epoch 3's 4.0, epoch 2's 3.0


def test_a_real_training_run(trained_run, tmp_path, capsys):
    """The best checkpoint's name, the curves it was chosen from and the comparison's circle agree on the epoch."""
    from flexlearn.viz.run_comparison import curves_figure
    from flexlearn.viz.training_curves import read_metrics_csv

    run_dir = Path(trained_run["cfg"].paths.output_dir)
    assert main([str(run_dir), "-o", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "1 runs" in out and trained_run["metrics"]["best_ckpt"] in out
    assert (tmp_path / "cmp" / "compare_curves.png").exists()
    run = load_run(run_dir)
    run.label = "run"
    cols = read_metrics_csv(run.metrics_csv)
    val = cols["val/ang_err_median_deg"]
    rows = [i for i in range(len(val)) if val[i] == np.nanmin(val)]
    assert run.best_epoch == int(cols["epoch"][rows[0]]) + 1  # Lightning's 0-based column, counted from 1
    planned = int(trained_run["cfg"].trainer.max_epochs)  # the cap binds: 3 epochs, far fewer than the step plan
    assert Path(run.metrics["best_ckpt"]).name == f"best-epoch{run.best_epoch:03d}-of{planned:03d}.ckpt"
    circles = _circles(curves_figure([run], ["val/ang_err_median_deg"]))
    assert circles == {"val median angular error [deg]": [(float(run.best_epoch), float(val[rows[0]]))]}


@pytest.mark.parametrize("case", ["missing", "empty", "bad_json", "no_curves"])
def test_bad_input_is_one_line(tmp_path, capsys, case):
    target = tmp_path / "x"
    if case != "missing":
        target.mkdir()
    if case == "bad_json":
        (target / "metrics.json").write_text("{not json")
    if case == "no_curves":
        (target / "metrics.json").write_text(json.dumps({"best_score": 1.0}))
    assert main([str(target), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flexlearn-compare: ") and str(target) in err[0]
