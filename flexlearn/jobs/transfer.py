"""Held-out modules: what a trained direction model does on modules of the same design it never saw.

A training run's ``transfer`` block names them: simulated modules by seed (``module_seeds``; the training sweep's
``data.sim`` settings with that seed as sweep and module seed, ``sweep_poses`` poses reaching ``max_colatitude``,
past the trained cap) and/or processed datasets of recorded modules (``datasets``). Each is calibrated on at most
``n_poses`` poses of its train split within the trained cap (`flexlearn.jobs.calibrate.evaluate_module`) and
scored on its test split, before (``test_module_uncalibrated/…``) and after (``test_module/…``) calibration,
pooled over the modules and per colatitude band; ``test_module/<name>/…`` per module. This is the figure a user
meets with a second robot, and the one `flexlearn-pipeline` prints first: ``test_module_summary`` names the modules
and their calibration and gives the numbers (`band_numbers`: within the cap, at 30–40°, all poses); the figures of
the pooled calibrated errors carry the same names and the same numbers in the same words.
"""

from __future__ import annotations

import copy
import math
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
    """(name, dataset path) of every held-out module of ``cfg.transfer`` (simulated ones built and cached).

    Args:
        cfg: the composed config (its ``transfer``, ``data`` and ``paths.cache_dir``).

    Returns:
        The held-out modules: ``module<seed>`` for each simulated one, ``dataset<i>`` for each recorded one.

    Raises:
        ConfigError: ``transfer.module_seeds`` with a data source other than ``sim``.
    """
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
    calibrated errors (``figures_test_module``). Empty when no held-out module is configured.

    Args:
        cfg: the composed config (its ``transfer`` block, ``data`` and ``paths.cache_dir``).
        model: the trained direction model (set to eval mode).
        output_dir: the run directory the figures go under.

    Returns:
        The metrics (with the figures' paths), or {} without held-out modules.

    Raises:
        ConfigError: an unknown key in ``transfer``.
    """
    import torch  # heavy imports off the start-up path (torch, matplotlib)

    from flexlearn.data.dataset import DirectionDataset
    from flexlearn.metrics import angular_error_deg, angular_error_summary, band_summary
    from flexlearn.viz.direction_figures import FigureCaption, write_evaluation_figures

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
    who, calibration = held_out_words(tr), calibration_words(tr)
    numbers = band_numbers(results, "test_module/")
    results["test_module_summary"] = (
        f"{who}, {calibration}: {numbers}; uncalibrated: {band_numbers(results, 'test_module_uncalibrated/', 1)}"
    )
    if tr.get("figures", True):
        paths = write_evaluation_figures(
            torch.cat(labels["cal"]).numpy(),
            torch.cat(preds["cal"]).float().numpy(),
            output_dir / "figures_test_module",
            caption=FigureCaption(f"Direction error of the held-out {who},\n{calibration}", numbers),
        )
        results["figures_test_module"] = {k: str(v) for k, v in paths.items()}
    return results


def _listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'; runs of consecutive numbers as '2001–2008'; more than 8 items shortened."""
    if len(items) > 2 and all(i.isdigit() for i in items):
        n = [int(i) for i in items]
        if n == list(range(n[0], n[0] + len(n))):
            return f"{n[0]}–{n[-1]}"
    if len(items) > 8:
        items = [*items[:6], f"{len(items) - 6} more"]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def held_out_words(tr: Any) -> str:
    """The held-out modules of a ``transfer`` block in words: 'simulated modules 2001–2008' (sweep seeds), 'recorded
    module rig_b' (dataset folder names), or both joined by 'and'.

    Args:
        tr: the ``transfer`` block (its ``module_seeds`` and ``datasets``).

    Returns:
        The words ('' when there are no held-out modules).
    """
    seeds = [str(int(s)) for s in tr.get("module_seeds") or []]
    names = [Path(str(p)).name for p in tr.get("datasets") or []]
    parts = []
    if seeds:
        parts.append(f"simulated module{'s' if len(seeds) > 1 else ''} {_listed(seeds)}")
    if names:
        parts.append(f"recorded module{'s' if len(names) > 1 else ''} {_listed(names)}")
    return " and ".join(parts)


def calibration_words(tr: Any) -> str:
    """'each calibrated on 50 poses within 29.5° (linear)' or 'uncalibrated' (``transfer.n_poses`` = 0).

    Args:
        tr: the ``transfer`` block (``n_poses``, ``calibration_cap`` [rad], ``kind``).

    Returns:
        The words.
    """
    n = int(tr.n_poses)
    if n <= 0:
        return "uncalibrated"
    return f"each calibrated on {n} poses within {math.degrees(float(tr.calibration_cap)):.1f}° ({tr.kind})"


def band_numbers(results: dict[str, Any], prefix: str, bands: int = 3) -> str:
    """The headline numbers of one prefix of the metrics, the same words wherever they are shown (console and
    figures): 'within the cap (0–29.5°): median 0.39°, p95 0.83°; at 30–40°: median 1.52°, p95 4.54°; all 800
    poses: median 0.60°, p95 4.14°'. ``bands``: how many of the three parts; a band without samples is left out.

    Args:
        results: the metrics (angular errors [deg]).
        prefix: the metrics' prefix (``test_module/``).
        bands: how many of the three parts to show (cap, past the cap, all).

    Returns:
        The line, or 'no poses scored'.
    """
    from flexlearn.metrics import CAP_DEG, PAST_CAP_DEG  # heavy import off the start-up path (torch)

    parts = []
    for key, words in (
        ("cap/", f"within the cap (0–{CAP_DEG:g}°)"),
        ("past_cap/", f"at {PAST_CAP_DEG[0]:g}–{PAST_CAP_DEG[1]:g}°"),
        ("", f"all {results.get(f'{prefix}n_samples', 0)} poses"),
    )[:bands]:
        if not results.get(f"{prefix}{key}n_samples"):
            continue
        median, p95 = results[f"{prefix}{key}ang_err_median_deg"], results[f"{prefix}{key}ang_err_p95_deg"]
        parts.append(f"{words}: median {median:.2f}°, p95 {p95:.2f}°")
    return "; ".join(parts) or "no poses scored"
