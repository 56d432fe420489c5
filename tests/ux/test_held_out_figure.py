"""The held-out-module figures say what they show in plain words (which modules, how they were calibrated) and show
the numbers the console's headline prints, with the same words; read back from the saved PNGs."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf
from PIL import Image

from flexlearn.jobs.transfer import band_numbers, calibration_words, held_out_words, transfer_metrics
from flexlearn.tasks.checkpoints import load_direction_model


def png_title(path: str | Path) -> str:
    with Image.open(path) as img:
        return img.text["Title"]


def test_words_for_the_modules_and_the_calibration():
    tr = OmegaConf.create({"module_seeds": list(range(2001, 2009)), "datasets": [], "n_poses": 50, "kind": "linear"})
    tr.calibration_cap = 0.5149
    assert held_out_words(tr) == "simulated modules 2001–2008"
    assert calibration_words(tr) == "each calibrated on 50 poses within 29.5° (linear)"
    tr.module_seeds, tr.datasets, tr.n_poses = [101], ["/data/rig_b", "/data/rig_c"], 0
    assert held_out_words(tr) == "simulated module 101 and recorded modules rig_b and rig_c"
    assert calibration_words(tr) == "uncalibrated"
    tr.module_seeds, tr.datasets = [5, 9, 11], []
    assert held_out_words(tr) == "simulated modules 5, 9 and 11"


def test_band_numbers_leave_out_empty_bands():
    r = {"p/n_samples": 10, "p/ang_err_median_deg": 0.6, "p/ang_err_p95_deg": 4.14}
    r |= {"p/cap/n_samples": 8, "p/cap/ang_err_median_deg": 0.394, "p/cap/ang_err_p95_deg": 0.826}
    r |= {"p/past_cap/n_samples": 0, "p/past_cap/ang_err_median_deg": float("nan")}
    assert (
        band_numbers(r, "p/")
        == "within the cap (0–29.5°): median 0.39°, p95 0.83°; all 10 poses: median 0.60°, p95 4.14°"
    )
    assert band_numbers(r, "p/", 1) == "within the cap (0–29.5°): median 0.39°, p95 0.83°"
    assert band_numbers({}, "p/") == "no poses scored"


def test_figure_and_headline_agree(trained_run, compose_cfg, tmp_path):
    dataset = Path(trained_run["metrics"]["dataset_path"])
    cfg = compose_cfg("train", [f"transfer.datasets=[{dataset}]", "transfer.n_poses=40"])
    model, _ = load_direction_model(trained_run["metrics"]["best_ckpt"])
    m = transfer_metrics(cfg, model, tmp_path)
    numbers = band_numbers(m, "test_module/")
    assert f"within the cap (0–29.5°): median {m['test_module/cap/ang_err_median_deg']:.2f}°" in numbers
    assert f"all {m['test_module/n_samples']} poses: median {m['test_module/ang_err_median_deg']:.2f}°" in numbers
    headline = m["test_module_summary"]
    assert headline.startswith(f"recorded module {dataset.name}, each calibrated on 40 poses within 29.5° (linear): ")
    assert numbers in headline and "; uncalibrated: within the cap (0–29.5°): median " in headline
    for name in ("error_polar_map", "error_histogram"):
        title = png_title(m["figures_test_module"][name]).splitlines()
        assert title[0] == f"Direction error of the held-out recorded module {dataset.name},"
        assert title[1] == "each calibrated on 40 poses within 29.5° (linear)"
        assert "; ".join(title[2 : 2 + numbers.count("; ") + 1]) == numbers  # the headline's numbers, its words
