"""Aggregate a Hydra multirun directory into one table (CSV + Markdown) and one figure.

A job is a sub-directory (any depth ≤ 4) holding ``.hydra/overrides.yaml``; its swept values come from
that file and its results from ``metrics.json`` (written by ``flexlearn-train``). A job without
``metrics.json`` (crashed, or still running) is listed with ``status = missing``. An Optuna study's
``optimization_results.yaml`` (best parameters and value) is copied into the Markdown report.

Outputs (atomic writes): ``summary.csv`` (one row per job: ``job``, ``status``, swept keys, metrics),
``summary.md`` (the same table plus mean/std/min/max of every numeric metric over the finished jobs)
and ``summary.png`` (metric ``y`` against swept key ``x``).
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from flexlearn.atomic import atomic_path
from flexlearn.errors import ConfigError, DataError

__all__ = ["collect_jobs", "aggregate_multirun"]


def _parse_override(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    key = key.lstrip("+~")
    try:
        v: Any = yaml.safe_load(value)
    except yaml.YAMLError:
        v = value
    if isinstance(v, (list, dict)):
        v = value
    return key, v


def _read_overrides(path: Path) -> list[str]:
    """The override strings of ``.hydra/overrides.yaml`` (a YAML list of strings; empty file: none)."""
    try:
        overrides = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DataError(f"file '{path}': not valid YAML ({' '.join(str(exc).split())})") from exc
    if overrides is None:
        return []
    if not isinstance(overrides, list):
        raise DataError(f"file '{path}': holds {_described(overrides)}, expected a list of override strings "
                        "('key=value')")
    for i, item in enumerate(overrides):
        if not isinstance(item, str):
            raise DataError(f"file '{path}': item {i} is {_described(item)}, expected an override string ('key=value')")
    return overrides


def _described(value: Any, limit: int = 60) -> str:
    """"the <YAML type> <value>", the value's repr cut to ``limit`` characters."""
    kinds = {dict: "mapping", list: "list", str: "string", int: "integer", float: "number", bool: "boolean"}
    text = repr(value)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"the {kinds.get(type(value), type(value).__name__)} {text}"


def collect_jobs(root: str | Path) -> list[dict[str, Any]]:
    """One dict per job: ``job`` (path relative to ``root``), ``status`` (ok | missing), overrides, metrics."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"config 'dir' = '{root}': not a directory")
    jobs = []
    for ov in sorted(root.glob("**/.hydra/overrides.yaml"), key=lambda p: _natural_key(p.parent.parent, root)):
        job_dir = ov.parent.parent
        if len(job_dir.relative_to(root).parts) > 4:
            continue
        overrides = _read_overrides(ov)
        row: dict[str, Any] = {"job": str(job_dir.relative_to(root)) or "."}
        swept = []
        for item in overrides:
            k, v = _parse_override(item)
            if not k.startswith("hydra"):
                row[k] = v
                swept.append(k)
        row[_SWEPT] = swept
        mfile = job_dir / "metrics.json"
        if mfile.exists():
            try:
                metrics = json.loads(mfile.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise DataError(f"file '{mfile}': not valid JSON ({exc})") from exc
            if not isinstance(metrics, dict):
                raise DataError(f"file '{mfile}': expected a JSON object of metrics")
            row["status"] = "ok"
            row.update({k: v for k, v in metrics.items()
                        if k not in swept and isinstance(v, (int, float, str)) and not isinstance(v, bool)})
        else:
            row["status"] = "missing"
        jobs.append(row)
    if not jobs:
        raise DataError(f"directory '{root}': no Hydra jobs found (no */.hydra/overrides.yaml)")
    return jobs


_SWEPT = "__swept__"  # the override keys of a job (internal)


def _natural_key(path: Path, root: Path) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in path.relative_to(root).parts]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def _columns(jobs: list[dict[str, Any]], metrics: Sequence[str]) -> tuple[list[str], list[str]]:
    meta = {"job", "status", _SWEPT, "output_dir", "best_ckpt", "last_ckpt", "dataset_path"}
    swept: list[str] = []
    for j in jobs:
        swept += [k for k in j[_SWEPT] if k not in swept]
    if metrics:
        missing = [m for m in metrics if not any(m in j for j in jobs)]
        if missing:
            raise ConfigError(f"config 'metrics' = {list(metrics)}: not found in any metrics.json: {missing}")
        cols = list(metrics)
    else:
        cols = sorted({k for j in jobs if j["status"] == "ok" for k in j if k not in meta and k not in swept})
    return swept, cols


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _markdown(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(_fmt(v).replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def aggregate_multirun(root: str | Path, out_dir: Optional[str | Path] = None, metrics: Sequence[str] = (),
                       x: Optional[str] = None, y: Optional[str] = None) -> dict[str, Any]:
    """Write ``summary.csv``, ``summary.md`` and ``summary.png`` for the multirun at ``root``.

    ``metrics``: the metric columns (default: all); ``x``: swept key for the figure (default: the first
    swept key whose value varies); ``y``: metric for the figure (default: the first metric column).
    Returns the paths, ``x``, ``y``, the number of jobs (all, finished) and the rows.
    """
    root = Path(root)
    jobs = collect_jobs(root)
    swept, cols = _columns(jobs, metrics)
    out = Path(out_dir) if out_dir else root
    out.mkdir(parents=True, exist_ok=True)
    header = ["job", "status"] + swept + cols
    rows = [[j.get(h) for h in header] for j in jobs]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows([["" if v is None else v for v in r] for r in rows])
    with atomic_path(out / "summary.csv") as p:
        p.write_text(buf.getvalue())
    done = [j for j in jobs if j["status"] == "ok"]
    stats = []
    for c in cols:
        vals = [float(j[c]) for j in done if _is_number(j.get(c))]
        if vals:
            stats.append([c, len(vals), statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0,
                          min(vals), max(vals)])
    md = [f"# Multirun summary: {root}\n", f"{len(done)} of {len(jobs)} jobs finished.\n", _markdown(header, rows)]
    if stats:
        md += ["\n## Metrics over the finished jobs\n", _markdown(["metric", "n", "mean", "std", "min", "max"], stats)]
    opt = root / "optimization_results.yaml"
    if opt.exists():
        md += ["\n## Optuna study\n", "```yaml\n" + opt.read_text() + "```\n"]
    with atomic_path(out / "summary.md") as p:
        p.write_text("\n".join(md))
    varying = [k for k in swept if len({str(j.get(k)) for j in jobs}) > 1]
    x = x or (varying[0] if varying else swept[0] if swept else "job")
    numeric_cols = [c for c in cols if any(_is_number(j.get(c)) for j in done)]
    y = y or (numeric_cols[0] if numeric_cols else None)
    if y is not None and y not in cols:
        raise ConfigError(f"config 'y' = {y!r}: not a metric of these jobs (have {cols})")
    if x != "job" and x not in swept:
        raise ConfigError(f"config 'x' = {x!r}: not a swept key of these jobs (have {swept})")
    fig_path = _figure(done, x, y, out / "summary.png", root) if y is not None else None
    return {"csv": str(out / "summary.csv"), "markdown": str(out / "summary.md"),
            "figure": None if fig_path is None else str(fig_path), "x": x, "y": y,
            "n_jobs": len(jobs), "n_done": len(done), "rows": [dict(zip(header, r)) for r in rows]}


def _figure(jobs: list[dict[str, Any]], x: str, y: str, path: Path, root: Path) -> Optional[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(j.get(x), float(j[y])) for j in jobs if _is_number(j.get(y))]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    if all(_is_number(p[0]) for p in pts):
        xs = [float(p[0]) for p in pts]
        ax.plot(xs, [p[1] for p in pts], "o", alpha=0.8)
        if min(xs) > 0 and max(xs) / min(xs) > 100:
            ax.set_xscale("log")
    else:
        cats = sorted({str(p[0]) for p in pts})
        ax.plot([cats.index(str(p[0])) for p in pts], [p[1] for p in pts], "o", alpha=0.8)
        ax.set_xticks(range(len(cats)), cats, rotation=30, ha="right")
    ys = [p[1] for p in pts]
    if min(ys) > 0 and max(ys) / min(ys) > 100:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(root.name, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as p:
        fig.savefig(p, format="png", dpi=120)
    plt.close(fig)
    return path
