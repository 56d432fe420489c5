"""The two figures of an Optuna sweep (``flexlearn-aggregate`` on a multirun with ``optimization_results.yaml``).

* ``optuna_history.png``: the optimised metric of every trial in trial order (failed or diverged trials as
  crosses on the top edge), the best value so far as a step line, the first TPE trial after the random start-up
  marked; a log axis when the values span more than 10×.
* ``optuna_importance.png``: each swept parameter's importance, as horizontal bars summing to 1 — Optuna's
  (``optuna.importance.get_param_importances`` on an in-memory study rebuilt from the jobs with the sweep's own
  search space: fANOVA, else the random forest's mean decrease in impurity), or, where Optuna or scikit-learn is
  missing, the correlation ratio η² of the metric on each parameter (quantile bins for numbers, one group per
  category), normalised. The method is named on the axis.

The search space and direction come from the jobs' ``.hydra/hydra.yaml`` (``hydra.sweeper``).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from matplotlib.figure import Figure

from flexlearn.config import is_finite_number
from flexlearn.viz.common import save_png

MIN_TRIALS_FOR_RANKING = 10  # below this the importance figure says its ranking is not reliable


def read_sweeper(root: str | Path) -> dict[str, Any]:
    """``hydra.sweeper`` of the first job of the multirun at ``root`` that has a ``.hydra/hydra.yaml``
    ({} when none).

    Args:
        root: the multirun folder (one subfolder per job).

    Returns:
        The sweeper block, or {}.
    """
    for f in sorted(Path(root).glob("*/.hydra/hydra.yaml")):
        try:
            doc = yaml.safe_load(f.read_text())
        except (yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        sweeper = ((doc or {}).get("hydra") or {}).get("sweeper")
        if isinstance(sweeper, dict):
            return sweeper
    return {}


def _distributions(params: dict[str, Any]) -> dict[str, Any]:
    """Optuna distributions of the sweeper's ``params`` (Hydra override syntax), by Hydra's optuna plugin."""
    from hydra_plugins.hydra_optuna_sweeper._impl import (  # optional dependency (the sweep extra)
        create_optuna_distribution_from_override,
    )

    parser = OverridesParser.create()
    out = {}
    for key, value in params.items():
        override = parser.parse_override(f"{key}={value}")
        out[key] = create_optuna_distribution_from_override(override)
    return out


def _coerce(value: Any, distribution: Any) -> Any:
    """A job's override value in the type its distribution expects."""
    choices = getattr(distribution, "choices", None)
    if choices is not None:
        for c in choices:
            if str(c) == str(value):
                return c
        return value
    return float(value)


def optuna_importances(
    trials: list[dict[str, Any]], y: str, params: dict[str, Any], direction: str
) -> Optional[tuple[dict[str, float], str]]:
    """(importances, method) by Optuna for the finished trials (metric finite): fANOVA, else the random
    forest's mean decrease in impurity (Optuna 2.10's fANOVA fails with scikit-learn >= 1.3); None when
    Optuna, scikit-learn or the search space is unavailable.

    Args:
        trials: the jobs' rows (swept keys and metric).
        y: the metric's key.
        params: the sweeper's search space (key -> Hydra override syntax).
        direction: "minimize" or "maximize".

    Returns:
        (parameter -> importance, method name), or None.
    """
    try:
        logging.getLogger("alembic").setLevel(logging.WARNING)  # its plugin set-up lines at import
        import optuna  # optional dependency (the sweep extra)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        dists = _distributions(params)
        study = optuna.create_study(direction=direction)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            for t in trials:
                if not is_finite_number(t.get(y)) or any(k not in t for k in dists):
                    continue
                study.add_trial(
                    optuna.trial.create_trial(
                        params={k: _coerce(t[k], d) for k, d in dists.items()}, distributions=dists, value=float(t[y])
                    )
                )
    except Exception:
        return None
    evaluators = (
        ("Optuna fANOVA", optuna.importance.FanovaImportanceEvaluator),
        ("Optuna random-forest impurity decrease", optuna.importance.MeanDecreaseImpurityImportanceEvaluator),
    )
    for method, evaluator in evaluators:
        try:
            return dict(optuna.importance.get_param_importances(study, evaluator=evaluator(seed=0))), method
        except Exception:
            continue
    return None


def eta_squared(trials: list[dict[str, Any]], y: str, keys: Sequence[str], bins: int = 4) -> dict[str, float]:
    """Correlation ratio η² = SS_between / SS_total of the metric grouped by each key (numbers in ``bins``
    quantile bins), normalised to sum 1 (all 0 when the metric does not vary).

    Args:
        trials: the jobs' rows (swept keys and metric); rows without a finite metric are left out.
        y: the metric's key.
        keys: the swept keys.
        bins: number of quantile bins of a numeric key (a key with at most ``bins`` values: one group per value).

    Returns:
        Key -> normalised η².
    """
    done = [t for t in trials if is_finite_number(t.get(y))]
    v = np.array([float(t[y]) for t in done])
    total = float(((v - v.mean()) ** 2).sum()) if len(v) else 0.0
    out = {}
    for k in keys:
        vals = [t.get(k) for t in done]
        if all(is_finite_number(x) for x in vals) and len({str(x) for x in vals}) > bins:
            x = np.array(vals, float)
            edges = np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1])
            groups = np.searchsorted(edges, x).astype(str)
        else:
            groups = np.array([str(x) for x in vals])
        between = sum(len(v[groups == g]) * (v[groups == g].mean() - v.mean()) ** 2 for g in set(groups))
        out[k] = float(between / total) if total > 0 else 0.0
    s = sum(out.values())
    return {k: (w / s if s > 0 else 0.0) for k, w in out.items()}


def _swept_keys(root: str | Path) -> list[str]:
    """The override keys of the jobs (``.hydra/overrides.yaml``; those not under ``hydra``), in first-seen order."""
    keys: list[str] = []
    for f in sorted(Path(root).glob("*/.hydra/overrides.yaml")):
        try:
            items = yaml.safe_load(f.read_text()) or []
        except (yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        for item in items if isinstance(items, list) else []:
            key = str(item).split("=", 1)[0].lstrip("+~")
            if "=" in str(item) and not key.startswith("hydra") and key not in keys:
                keys.append(key)
    return keys


def history_figure(
    trials: list[dict[str, Any]], y: str, direction: str, path: Path, title: str, n_startup: Optional[int] = None
) -> Path:
    """Write ``optuna_history.png`` (module docstring).

    Args:
        trials: the jobs' rows in trial order.
        y: the metric's key.
        direction: "minimize" or "maximize".
        path: the PNG file to write.
        title: the figure's title.
        n_startup: random start-up trials before TPE (marked); None: not marked.

    Returns:
        ``path``.
    """
    n = np.arange(len(trials))
    v = np.array([float(t[y]) if is_finite_number(t.get(y)) else np.nan for t in trials])
    ok = np.isfinite(v)
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(n[ok], v[ok], "o", color="C0", ms=5, alpha=0.8, label="trial")
    if ok.any():
        best_fn = np.fmin.accumulate if direction == "minimize" else np.fmax.accumulate
        best = best_fn(np.where(ok, v, np.inf if direction == "minimize" else -np.inf))
        shown = np.isfinite(best)
        ax.step(n[shown], best[shown], where="post", color="C3", lw=1.8, label=f"best so far ({direction})")
        i_best = int(np.nanargmin(v) if direction == "minimize" else np.nanargmax(v))
        ax.plot([i_best], [v[i_best]], "o", mfc="none", mec="C3", ms=12, mew=1.5)
        ax.annotate(
            f"best: trial {i_best}, {v[i_best]:.4g}",
            (i_best, v[i_best]),
            xytext=(6, 8),
            textcoords="offset points",
            fontsize=8,
            color="C3",
        )
        if np.nanmax(v) > 0 and np.nanmin(v) > 0 and np.nanmax(v) / np.nanmin(v) > 10:
            ax.set_yscale("log")
    if (~ok).any():
        top = np.nanmax(v) if ok.any() else 1.0
        ax.plot(
            n[~ok],
            np.full((~ok).sum(), top),
            "x",
            color="k",
            ms=7,
            clip_on=False,
            label=f"failed or diverged ({int((~ok).sum())})",
        )
    if n_startup and 0 < n_startup < len(trials):
        ax.axvline(n_startup - 0.5, color="0.6", ls=":", lw=1)
        ax.annotate(
            "random start-up | TPE",
            (n_startup - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, -12),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color="0.4",
        )
    ax.set(xlabel="trial", ylabel=y, title=title)
    ax.set_xticks(n if len(n) <= 25 else np.linspace(0, len(n) - 1, 11).round().astype(int))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return save_png(fig, path)


def importance_figure(importance: dict[str, float], method: str, y: str, path: Path, title: str, n_trials: int) -> Path:
    """Write ``optuna_importance.png`` (module docstring).

    Args:
        importance: parameter -> importance (summing to 1).
        method: how the importances were computed (named on the axis).
        y: the metric's key.
        path: the PNG file to write.
        title: the figure's title.
        n_trials: number of finished trials (below ``MIN_TRIALS_FOR_RANKING`` the figure says so).

    Returns:
        ``path``.
    """
    items = sorted(importance.items(), key=lambda kv: kv[1])
    fig = Figure(figsize=(7.0, 1.4 + 0.45 * max(len(items), 1)), layout="constrained")
    ax = fig.add_subplot()
    ax.barh([k for k, _ in items], [w for _, w in items], color="C0")
    for i, (_, w) in enumerate(items):
        ax.annotate(f"{w:.2f}", (w, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max([w for _, w in items] + [0.01]) * 1.18)
    few = "; too few to rank reliably" if n_trials < MIN_TRIALS_FOR_RANKING else ""
    ax.set(xlabel=f"importance for {y}\n({method}; {n_trials} finished trials{few})", title=title)
    ax.grid(True, axis="x", alpha=0.3)
    return save_png(fig, path)


def write_optuna_figures(root: str | Path, trials: list[dict[str, Any]], y: str, out_dir: str | Path) -> list[Path]:
    """Both figures for the multirun at ``root`` (``trials``: the jobs' rows in trial order, with the swept
    keys and ``y``) into ``out_dir``; returns their paths (the importance figure needs two finished trials).

    Args:
        root: the multirun folder (the sweeper's settings are read from its jobs).
        trials: the jobs' rows in trial order.
        y: the metric's key.
        out_dir: folder of the figures.

    Returns:
        The paths written (history first).
    """
    sweeper = read_sweeper(root)
    direction = str(sweeper.get("direction") or "minimize")
    direction = direction if direction in ("minimize", "maximize") else "minimize"
    params = sweeper.get("params") or {}
    n_startup = (sweeper.get("sampler") or {}).get("n_startup_trials")
    name = sweeper.get("study_name") or Path(root).name
    out = Path(out_dir)
    paths = [
        history_figure(
            trials,
            y,
            direction,
            out / "optuna_history.png",
            f"Optuna study {name}: history",
            n_startup if isinstance(n_startup, int) else None,
        )
    ]
    finished = [t for t in trials if is_finite_number(t.get(y))]
    keys = [k for k in params if any(k in t for t in trials)] or _swept_keys(root)
    if len(finished) >= 2 and keys:
        found = (
            optuna_importances(trials, y, {k: params[k] for k in keys if k in params}, direction) if params else None
        )
        importance, method = found or (eta_squared(trials, y, keys), "η², variance explained")
        paths.append(
            importance_figure(
                importance,
                method,
                y,
                out / "optuna_importance.png",
                f"Optuna study {name}: parameter importance",
                len(finished),
            )
        )
    return paths
