"""Held-out modules: what a trained direction model does on modules of the same design it never saw.

A training run's ``transfer`` block names them: simulated modules by seed (``module_seeds``; the training sweep's
``data.sim`` settings with that seed as sweep and module seed, ``sweep_poses`` poses reaching ``max_colatitude``,
past the trained cap) and/or processed datasets of recorded modules (``datasets``). Each is calibrated on at most
``n_poses`` poses of its train split within the trained cap (`flexlearn.jobs.calibrate.evaluate_module`) and
scored on its test split, before (``test_module_uncalibrated/…``) and after (``test_module/…``) calibration,
pooled over the modules and per colatitude band; ``test_module/<name>/…`` per module. This is the figure a user
meets with a second robot, and the one `flexlearn-pipeline` prints first.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from flexlearn.config import check, to_plain_dict
from flexlearn.jobs.calibrate import CalibrationFit, evaluate_module

TRANSFER_KEYS = (
    "module_seeds",
    "datasets",
    "n_poses",
    "kind",
    "sweep_poses",
    "max_colatitude",
    "mechanical_limit",
    "calibration_cap",
    "figures",
)


def held_out_datasets(cfg: DictConfig) -> list[tuple[str, Path]]:
    """(name, dataset path) of every held-out module of ``cfg.transfer`` (simulated ones built and cached)."""
    from flexlearn.data.sources import DataConfig, prepare_dataset  # heavy import off the start-up path (torch)

    tr = cfg.transfer
    out: list[tuple[str, Path]] = []
    data = to_plain_dict(cfg.data, "data")
    for seed in tr.get("module_seeds") or []:
        check(
            data.get("source", "sim") == "sim",
            "transfer.module_seeds",
            list(tr.module_seeds),
            "needs data.source=sim (use transfer.datasets for recorded modules)",
        )
        sim = copy.deepcopy(data.get("sim") or {})
        geometry = {
            **(sim.get("geometry") or {}),
            "max_colatitude": float(tr.max_colatitude),
            "mechanical_limit": float(tr.mechanical_limit),
        }
        sim.update(seed=int(seed), module_seed=int(seed), n_poses=int(tr.sweep_poses), geometry=geometry)
        path = prepare_dataset(
            DataConfig(source="sim", sim=sim, processing=data.get("processing") or {}), cfg.paths.cache_dir
        )
        out.append((f"module{int(seed)}", path))
    for i, p in enumerate(tr.get("datasets") or []):
        out.append((f"dataset{i}", Path(str(p))))
    return out


def transfer_metrics(cfg: DictConfig, model: Any, output_dir: Path) -> dict[str, Any]:
    """``test_module/…`` and ``test_module_uncalibrated/…`` metrics (pooled, per band, per module), the summary
    line ``test_module_summary`` and, with ``transfer.figures``, the polar map and histogram of the pooled
    calibrated errors (``figures_test_module``). Empty when no held-out module is configured."""
    import torch  # heavy imports off the start-up path (torch, matplotlib)

    from flexlearn.data.dataset import DirectionDataset
    from flexlearn.metrics import angular_error_deg, angular_error_summary, band_summary
    from flexlearn.viz.direction_figures import write_evaluation_figures

    tr = cfg.get("transfer")
    if not tr or not (tr.get("module_seeds") or tr.get("datasets")):
        return {}
    extra = sorted(set(tr) - set(TRANSFER_KEYS))
    check(not extra, "transfer", extra, f"unknown key(s); known keys: {list(TRANSFER_KEYS)}")
    model = model.eval()
    results: dict[str, Any] = {}
    labels: dict[str, list[torch.Tensor]] = {"cal": [], "raw": []}
    preds: dict[str, list[torch.Tensor]] = {"cal": [], "raw": []}
    for name, path in held_out_datasets(cfg):
        ds = DirectionDataset.load(path)
        for kind, k in (("cal", int(tr.n_poses)), ("raw", 0)):
            fit = CalibrationFit(n_poses=k, kind=str(tr.kind), max_colatitude=float(tr.calibration_cap))
            m, label, pred, _ = evaluate_module(
                model, ds, fit, prefix=f"test_module/{name}/" if kind == "cal" else "unused/"
            )
            labels[kind].append(label)
            preds[kind].append(pred)
            if kind == "cal":
                results.update(
                    {
                        key: v
                        for key, v in m.items()
                        if key.endswith(("ang_err_median_deg", "p95_deg", "n_samples")) and key.count("/") <= 3
                    }
                )
    for kind, prefix in (("cal", "test_module/"), ("raw", "test_module_uncalibrated/")):
        label, pred = torch.cat(labels[kind]), torch.cat(preds[kind])
        err = angular_error_deg(pred, label)
        results.update(angular_error_summary(err, prefix))
        results.update(band_summary(err, label, prefix))
    results["test_module_summary"] = (
        f"{len(labels['cal'])} held-out module(s), {int(tr.n_poses)} calibration poses each: "
        f"{results['test_module/cap/ang_err_median_deg']:.2f}° median / "
        f"{results['test_module/cap/ang_err_p95_deg']:.2f}° "
        f"p95 within the cap, {results['test_module/past_cap/ang_err_median_deg']:.2f}° / "
        f"{results['test_module/past_cap/ang_err_p95_deg']:.2f}° at 30–40°; uncalibrated "
        f"{results['test_module_uncalibrated/cap/ang_err_median_deg']:.2f}° / "
        f"{results['test_module_uncalibrated/cap/ang_err_p95_deg']:.2f}°"
    )
    if tr.get("figures", True):
        paths = write_evaluation_figures(
            torch.cat(labels["cal"]).numpy(),
            torch.cat(preds["cal"]).float().numpy(),
            output_dir / "figures_test_module",
        )
        results["figures_test_module"] = {k: str(v) for k, v in paths.items()}
    return results
