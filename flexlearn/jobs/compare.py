"""Several training runs side by side, from their local files: what differs between them and how they score.

A run directory is one that holds ``metrics.json`` (written at the end of a run) or ``csv/metrics.csv`` (the
curves, written while it trains); a folder that is neither (a sweep's ``multiruns/<time>``, a parent of several
runs) stands for every run directory below it. For each run: its ``config.yaml`` flattened to dotted keys, its
``metrics.json`` and its curves. The comparison names runs by the config keys whose values differ between them
(paths, directories and the run's own bookkeeping excluded), ranks them by the checkpoint monitor's best value
(``best_score`` in ``metrics.json``, lower or higher as the monitor's ``mode`` says) and writes:

* ``compare_curves.png``: each curve quantity (losses, validation errors, ...) in one panel, one line per run, the
  best epoch of each run marked;
* ``compare_test.png``: the test errors of each run (median and p95, within the training cap and overall);
* ``compare.md`` and ``compare.json``: one row per run, the differing keys and the objective first, best marked.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from flexlearn.atomic import atomic_path, write_json_atomic
from flexlearn.errors import DataError

__all__ = ["RunRecord", "best_epoch_of", "find_runs", "load_run", "differing_keys", "compare_runs", "MAX_RUNS"]

MAX_RUNS = 200
IGNORED_KEYS = re.compile(r"^(paths|hydra|run)\.|(_dir|dirpath)$|^ckpt_path$")
TABLE_METRICS = ("test/cap/ang_err_median_deg", "test/cap/ang_err_p95_deg", "test/ang_err_median_deg", "epochs")


@dataclass
class RunRecord:
    """One run's files: ``config`` flattened to dotted keys, ``metrics`` from metrics.json ({} when absent)."""

    directory: Path
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    metrics_csv: Optional[Path] = None
    label: str = ""

    @property
    def monitor(self) -> tuple[str, str]:
        """(metric, 'min' | 'max') the run's best checkpoint was chosen by."""
        key = str(self.config.get("callbacks.model_checkpoint.monitor", "val/ang_err_median_deg"))
        return key, str(self.config.get("callbacks.model_checkpoint.mode", "min"))

    @property
    def objective(self) -> Optional[float]:
        """The monitor's best value (``best_score``), None when the run has none (unfinished or diverged)."""
        v = self.metrics.get("best_score")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    @property
    def best_epoch(self) -> Optional[int]:
        """The epoch of the best checkpoint counted from 1 (as the progress lines count it), from its file name: the
        number in ``best-epoch059-of150.ckpt`` (counted from 1), or one more than the number in an older
        ``best-epoch058.ckpt`` or Lightning's ``epoch=58-…`` (its 0-based index); None if unknown."""
        return best_epoch_of(str(self.metrics.get("best_ckpt", "")))


def best_epoch_of(checkpoint: str) -> Optional[int]:
    """The epoch counted from 1 that a checkpoint's file name names (`RunRecord.best_epoch`), None if it names none.

    Args:
        checkpoint: the checkpoint's path or file name.

    Returns:
        The epoch counted from 1, or None.
    """
    name = Path(checkpoint).name
    m = re.search(r"epoch(\d+)-of\d+", name)
    if m:
        return int(m[1])
    m = re.search(r"epoch[=_-]?(\d+)", name)
    return int(m[1]) + 1 if m else None


def _is_run(d: Path) -> bool:
    return (d / "metrics.json").is_file() or (d / "csv" / "metrics.csv").is_file()


def find_runs(paths: Sequence[Path]) -> list[Path]:
    """Run directories named by ``paths`` (each a run or a folder of runs, searched 4 levels deep), in order.

    Args:
        paths: run directories, or folders of runs (a sweep).

    Returns:
        The run directories, each once.

    Raises:
        DataError: a path that does not exist or holds no run, or more than `MAX_RUNS` runs in all.
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise DataError(f"{p}: not a directory (give run directories or a sweep's directory)")
        runs = [p] if _is_run(p) else sorted({m.parent for m in _walk(p, 4)}, key=_natural)
        if not runs:
            raise DataError(f"{p}: no run below it (a run directory holds metrics.json or csv/metrics.csv)")
        found += [r for r in runs if r not in found]
    if len(found) > MAX_RUNS:
        raise DataError(f"{len(found)} runs found; compare at most {MAX_RUNS} at a time (name fewer directories)")
    return found


def _walk(root: Path, depth: int) -> list[Path]:
    hits = list(root.glob("metrics.json")) + list(root.glob("csv/metrics.csv"))
    hits = [h if h.name == "metrics.json" else h.parent for h in hits]
    if depth and not hits:
        for sub in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")):
            hits += _walk(sub, depth - 1)
    return hits


def _natural(p: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def load_run(directory: Path) -> RunRecord:
    """Read one run's ``config.yaml``, ``metrics.json`` and ``csv/metrics.csv`` (each optional).

    Args:
        directory: the run directory.

    Returns:
        The run's record (empty config, metrics or curves where a file is absent).

    Raises:
        DataError: a file that exists but cannot be parsed, naming it.
    """
    import json  # local: the module's only JSON reader

    run = RunRecord(Path(directory))
    cfg, met = run.directory / "config.yaml", run.directory / "metrics.json"
    if cfg.is_file():
        try:
            run.config = _flatten(yaml.safe_load(cfg.read_text()) or {})
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise DataError(f"{cfg}: not readable YAML ({str(e).splitlines()[0]})") from None
    if met.is_file():
        try:
            loaded = json.loads(met.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise DataError(f"{met}: not readable JSON ({e})") from None
        run.metrics = loaded if isinstance(loaded, dict) else {}
    curves = run.directory / "csv" / "metrics.csv"
    run.metrics_csv = curves if curves.is_file() else None
    return run


def differing_keys(runs: Sequence[RunRecord]) -> list[str]:
    """Config keys whose values differ between the runs (bookkeeping and paths left out), sorted.

    Args:
        runs: the runs to compare.

    Returns:
        The differing keys (dotted paths).
    """
    keys = sorted({k for r in runs for k in r.config if not IGNORED_KEYS.search(k)})
    return [k for k in keys if len({repr(r.config.get(k)) for r in runs}) > 1]


def _label(run: RunRecord, keys: Sequence[str]) -> str:
    parts = [f"{k}={run.config.get(k)}" for k in keys]
    return ", ".join(parts) if parts else run.directory.name


def _ranked(runs: list[RunRecord]) -> list[RunRecord]:
    def score(r: RunRecord) -> float:
        v = r.objective
        return math.inf if v is None else (-v if r.monitor[1] == "max" else v)

    return sorted(runs, key=score)


def _table(runs: list[RunRecord], keys: Sequence[str], best: Optional[RunRecord]) -> str:
    head = ["", "run", *keys, f"best {runs[0].monitor[0]}", *TABLE_METRICS, "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in runs:
        cells = ["**best**" if r is best else "", f"`{r.directory}`", *[str(r.config.get(k)) for k in keys]]
        cells.append("–" if r.objective is None else f"{r.objective:.4g}")
        for m in TABLE_METRICS:
            v = r.metrics.get(m)
            cells.append(f"{v:.4g}" if isinstance(v, (int, float)) and math.isfinite(v) else "–")
        cells.append(str(r.metrics.get("status", "running or interrupted")))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def compare_runs(paths: Sequence[Path], out_dir: Path, quantities: Optional[Sequence[str]] = None) -> dict:
    """Compare the runs named by ``paths`` (module docstring); write the figures and tables into ``out_dir``.

    Args:
        paths: run directories or folders of runs.
        out_dir: where the figures and tables go (created).
        quantities: curve columns to draw (default: losses and validation errors the runs logged).

    Returns:
        a summary: runs, differing keys, the best run's directory, checkpoint and objective, files written.
    """
    from flexlearn.viz.run_comparison import plot_curves, plot_test_metrics  # matplotlib: only when drawing

    runs = [load_run(d) for d in find_runs(paths)]
    if not any(r.metrics_csv for r in runs):
        names = ", ".join(str(r.directory) for r in runs[:3]) + (" ..." if len(runs) > 3 else "")
        raise DataError(f"{names}: no csv/metrics.csv to draw (curves are logged by logger=csv, the default)")
    keys = differing_keys(runs)
    for r in runs:
        r.label = _label(r, keys)
    ranked = _ranked(runs)
    best = ranked[0] if ranked[0].objective is not None else None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [plot_curves(runs, out / "compare_curves.png", quantities)]
    if any(any(k.startswith("test/") for k in r.metrics) for r in runs):
        files.append(plot_test_metrics(runs, out / "compare_test.png"))
    summary = {
        "runs": [str(r.directory) for r in ranked],
        "differing_keys": keys,
        "objective": ranked[0].monitor[0],
        "best_run": None if best is None else str(best.directory),
        "best_checkpoint": None if best is None else best.metrics.get("best_ckpt"),
        "best_objective": None if best is None else best.objective,
        "table": [
            {"run": str(r.directory), **{k: r.config.get(k) for k in keys}, "objective": r.objective} for r in ranked
        ],
    }
    with atomic_path(out / "compare.md") as tmp:
        tmp.write_text(_table(ranked, keys, best))
    write_json_atomic(out / "compare.json", summary)
    files += [out / "compare.md", out / "compare.json"]
    summary["files"] = [str(f) for f in files]
    return summary
