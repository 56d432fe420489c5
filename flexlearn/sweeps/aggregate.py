"""Aggregate a Hydra multirun directory into one table (CSV + Markdown) and one figure.

A job is a sub-directory (any depth ≤ 4) holding ``.hydra/overrides.yaml``; its swept values come from
that file and its results from ``metrics.json`` (written by ``flexlearn-train``). A job without
``metrics.json`` (crashed, or still running) is listed with ``status = missing``. An Optuna study's
``optimization_results.yaml`` (best parameters and value) is copied into the Markdown report.

The sweep's objective is the value each job returned to the sweeper: its best checkpoint's ``optimized_metric``
(``best_score`` in ``metrics.json``; the metric's last value for a job that records no ``best_score``), the metric
named by the jobs' ``.hydra/config.yaml``; minimised unless the sweeper's ``direction`` (``multirun.yaml``) says
``maximize``. The best run is the finished job with the best finite objective (`best_run`).

Outputs (atomic writes): ``summary.csv`` (one row per job: ``job``, ``status``, swept keys, the objective, the other
metrics), ``summary.md`` (the best run — its directory, checkpoint and metrics —, then a table of the jobs with their
swept keys and objective, the best row marked, then mean/std/min/max of every numeric metric over the finished jobs)
and ``summary.png`` (metric ``y``, by default the jobs' ``optimized_metric``, against swept key ``x``, coloured
by a second swept key; `flexlearn.viz.sweep_figure`).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import statistics
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from flexlearn.atomic import atomic_path, prepare_output_dir
from flexlearn.config import is_finite_number
from flexlearn.errors import ConfigError, DataError, FlexlearnError

__all__ = ["collect_jobs", "aggregate_multirun", "best_run", "best_run_lines", "print_sweep_summary", "sweep_direction"]

log = logging.getLogger(__name__)
MAX_METRICS = 6  # metrics printed for the best run (all of them are in summary.md and its metrics.json)


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
        raise DataError(
            f"file '{path}': holds {_described(overrides)}, expected a list of override strings ('key=value')"
        )
    for i, item in enumerate(overrides):
        if not isinstance(item, str):
            raise DataError(f"file '{path}': item {i} is {_described(item)}, expected an override string ('key=value')")
    return overrides


def _described(value: Any, limit: int = 60) -> str:
    """The text "the <YAML type> <value>", the value's repr cut to ``limit`` characters."""
    kinds = {dict: "mapping", list: "list", str: "string", int: "integer", float: "number", bool: "boolean"}
    text = repr(value)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"the {kinds.get(type(value), type(value).__name__)} {text}"


def collect_jobs(root: str | Path) -> list[dict[str, Any]]:
    """One dict per job: ``job`` (path relative to ``root``), ``status`` (ok | missing), overrides, metrics.

    Args:
        root: the multirun directory (jobs up to 4 levels below it).

    Returns:
        The jobs in natural order of their paths.

    Raises:
        ConfigError: ``root`` is not a directory.
        DataError: a job's overrides or ``metrics.json`` cannot be read.
    """
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
        row[_OPTIMIZED] = _optimized_metric(job_dir / ".hydra" / "config.yaml")
        mfile = job_dir / "metrics.json"
        if mfile.exists():
            try:
                metrics = json.loads(mfile.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise DataError(f"file '{mfile}': not valid JSON ({exc})") from exc
            if not isinstance(metrics, dict):
                raise DataError(f"file '{mfile}': expected a JSON object of metrics")
            row["status"] = "ok"
            row.update({k: v for k, v in _read_back(metrics).items() if k not in swept})
        else:
            row["status"] = "missing"
        jobs.append(row)
    if not jobs:
        raise DataError(f"directory '{root}': no Hydra jobs found (no */.hydra/overrides.yaml)")
    return jobs


def _read_back(metrics: dict[str, Any]) -> dict[str, Any]:
    """The scalar metrics of a ``metrics.json``, a value written as null with its ``<key>_null_reason`` (strict
    JSON, `flexlearn.atomic.strict_json`) read back as the NaN or ±inf it was."""
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        reason = metrics.get(f"{k}_null_reason")
        if k.endswith("_null_reason"):
            continue
        if v is None and reason in ("nan", "inf", "-inf"):
            out[k] = float(reason)
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            out[k] = v
    return out


OBJECTIVE = "objective"  # the column of the value each job returned to the sweeper
_SWEPT = "__swept__"  # the override keys of a job (internal)
_OPTIMIZED = "__optimized__"  # the job config's optimized_metric (internal)
# Metrics never chosen as the figure's default y: bookkeeping, not results.
_BOOKKEEPING = ("epochs", "world_size", "id/iterations", "id/converged")


def _optimized_metric(config_file: Path) -> Optional[str]:
    """``optimized_metric`` of a job's ``.hydra/config.yaml`` (None when absent or unreadable)."""
    try:
        cfg = yaml.safe_load(config_file.read_text()) if config_file.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return None
    value = cfg.get("optimized_metric") if isinstance(cfg, dict) else None
    return value if isinstance(value, str) else None


def _natural_key(path: Path, root: Path) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in path.relative_to(root).parts]


def _columns(
    jobs: list[dict[str, Any]], metrics: Sequence[str], first: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """(swept keys in order of appearance, metric columns: ``metrics`` as given, else all, ``first`` first)."""
    meta = {"job", "status", _SWEPT, _OPTIMIZED, "output_dir", "best_ckpt", "last_ckpt", "dataset_path"}
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
        lead = [c for c in first if c in cols]
        cols = lead + [c for c in cols if c not in lead]
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


# long: 58 lines of code; its docstring documents all 5 parameters
def aggregate_multirun(
    root: str | Path,
    out_dir: Optional[str | Path] = None,
    metrics: Sequence[str] = (),
    x: Optional[str] = None,
    y: Optional[str] = None,
) -> dict[str, Any]:
    """Write ``summary.csv``, ``summary.md`` and ``summary.png`` for the multirun at ``root``.

    ``metrics``: the metric columns (default: all, the objective first); ``x``: swept key for the figure (default:
    the first swept key whose value varies); ``y``: metric for the figure (default: the objective).
    Returns the paths, ``x``, ``y``, the number of jobs (all, finished), the rows, ``objective`` (the optimised
    metric's name; None when the jobs record none) and ``best`` (`best_run`: None when no finished job has a
    finite objective). ``out_dir`` other than ``root`` goes through
    `flexlearn.atomic.prepare_output_dir` (new, empty or flexlearn's own; checked before the jobs are read): a folder
    of the user's own, where ``summary.csv`` was overwritten, is refused.

    Args:
        root: the multirun directory.
        out_dir: where the summary goes (None: ``root``).
        metrics: the metric columns (empty: all).
        x: the swept key on the figure's x axis (None: the default above).
        y: the metric on the figure's y axis (None: the default above).

    Returns:
        The summary dict described above (``csv``, ``markdown``, ``figure``, ``x``, ``y``, ``hue``, ``n_jobs``,
        ``n_done``, ``rows``, ``best``, ``objective``).

    Raises:
        ConfigError: ``root`` is not a directory, or ``x`` / ``y`` is not a column.
        OutputPathError: ``out_dir`` is refused.
        DataError: a job's files cannot be read.
    """
    root = Path(root)
    out = root
    if out_dir and Path(out_dir).resolve() != root.resolve():
        out = prepare_output_dir(out_dir, inputs=[root])
    jobs = collect_jobs(root)
    done = [j for j in jobs if j["status"] == "ok"]
    metric = _objective(jobs, done, _columns(jobs, ())[1])
    if metric is not None:
        for j in done:
            j[OBJECTIVE] = j["best_score"] if is_finite_number(j.get("best_score")) else j.get(metric)
    shown = [OBJECTIVE, *metrics] if metrics and metric else metrics
    swept, cols = _columns(jobs, shown, [OBJECTIVE, metric or ""])
    header = ["job", "status"] + swept + cols
    rows = [[j.get(h) for h in header] for j in jobs]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows([["" if v is None else v for v in r] for r in rows])
    with atomic_path(out / "summary.csv") as p:
        p.write_text(buf.getvalue())
    best = best_run(root, jobs, metric) if metric is not None else None
    with atomic_path(out / "summary.md") as p:
        p.write_text(_summary_markdown(root, jobs, swept, cols, best, explicit=bool(metrics)))
    varying = [k for k in swept if len({str(j.get(k)) for j in jobs}) > 1]
    x = x or (varying[0] if varying else swept[0] if swept else "job")
    y = y or (OBJECTIVE if OBJECTIVE in cols else _default_y(done, cols))
    if y is not None and y not in cols:
        raise ConfigError(f"config 'y' = {y!r}: not a metric of these jobs (have {cols})")
    if x != "job" and x not in swept:
        raise ConfigError(f"config 'x' = {x!r}: not a swept key of these jobs (have {swept})")
    hue = _default_hue(jobs, [k for k in varying if k != x])
    fig_path = None
    if y is not None:
        from flexlearn.viz.sweep_figure import sweep_figure  # heavy import off the start-up path (matplotlib)

        fig_path = sweep_figure(
            done, x, y, hue, out / "summary.png", root.name, others=[k for k in varying if k not in (x, hue)]
        )
    return {
        "csv": str(out / "summary.csv"),
        "markdown": str(out / "summary.md"),
        "figure": None if fig_path is None else str(fig_path),
        "x": x,
        "y": y,
        "hue": hue,
        "n_jobs": len(jobs),
        "n_done": len(done),
        "rows": [dict(zip(header, r)) for r in rows],
        "best": best,
        "objective": metric,
    }


def sweep_direction(root: Path) -> str:
    """``minimize`` or ``maximize``: the sweeper's ``direction`` in the multirun's ``multirun.yaml`` (Optuna's
    ``hydra.sweeper.direction``; a grid sweep has none: ``minimize``, as `flexlearn.apps.runner.sweep_value`
    reports a failed job as +inf).

    Args:
        root: the multirun directory.

    Returns:
        ``minimize`` or ``maximize``.
    """
    try:
        cfg = yaml.safe_load((root / "multirun.yaml").read_text()) if (root / "multirun.yaml").is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return "minimize"
    sweeper = (cfg.get("hydra") or {}).get("sweeper") if isinstance(cfg, dict) else None
    direction = sweeper.get("direction") if isinstance(sweeper, dict) else None
    if isinstance(direction, list) and direction:  # a one-objective study may list its direction
        direction = direction[0]
    return "maximize" if str(direction).lower() == "maximize" else "minimize"


def best_run(root: Path, jobs: list[dict[str, Any]], metric: str) -> Optional[dict[str, Any]]:
    """The finished job with the best finite objective (the ``objective`` of the rows, set by `aggregate_multirun`;
    the first one on ties), as a dict: ``job``, ``objective`` (the optimised ``metric``'s name), ``value``,
    ``direction``, ``dir`` (the run directory: ``output_dir`` of its ``metrics.json``, else ``root/<job>``),
    ``checkpoint`` (its ``best_ckpt``, None when it wrote none), ``overrides`` (its values of the swept keys that
    vary) and ``metrics`` (its numeric results). None when no finished job has a finite objective.

    Args:
        root: the multirun directory.
        jobs: the rows of `collect_jobs`, with their ``objective`` set.
        metric: the optimised metric's name.

    Returns:
        The best job's dict, or None.
    """
    direction = sweep_direction(root)
    scored = [j for j in jobs if j["status"] == "ok" and is_finite_number(j.get(OBJECTIVE))]
    if not scored:
        return None
    sign = -1.0 if direction == "maximize" else 1.0
    best = min(scored, key=lambda j: sign * float(j[OBJECTIVE]))
    varying = [k for k in best[_SWEPT] if len({str(j.get(k)) for j in jobs}) > 1]
    meta = {"job", "status", _SWEPT, _OPTIMIZED, "output_dir", "best_ckpt", "last_ckpt", "dataset_path"}
    return {
        "job": best["job"],
        "objective": metric,
        "value": float(best[OBJECTIVE]),
        "direction": direction,
        "dir": str(best.get("output_dir") or root / best["job"]),
        "checkpoint": best.get("best_ckpt") or None,
        "overrides": {k: best.get(k) for k in varying},
        "metrics": {
            k: v
            for k, v in best.items()
            if k not in meta and k != OBJECTIVE and k not in best[_SWEPT] and is_finite_number(v)
        },
    }


def _summary_markdown(
    root: Path,
    jobs: list[dict[str, Any]],
    swept: list[str],
    cols: list[str],
    best: Optional[dict[str, Any]],
    explicit: bool,
) -> str:
    """``summary.md``: the best run, the jobs (swept keys and objective first, the best row marked; every metric
    when ``explicit`` columns were asked for or no objective is known, else the full table is ``summary.csv``'s),
    the statistics of every numeric metric and the Optuna study."""
    done = [j for j in jobs if j["status"] == "ok"]
    md = [f"# Multirun summary: {root}\n", f"{len(done)} of {len(jobs)} jobs finished.\n"]
    if best is not None:
        md += [
            f"## Best run: job {best['job']}\n",
            f"- objective = {_fmt(best['value'])}: the best checkpoint's {best['objective']} ({best['direction']}d)",
            "- overrides: " + (" ".join(f"{k}={_fmt(v)}" for k, v in best["overrides"].items()) or "none"),
            f"- directory: {best['dir']}",
            f"- checkpoint: {best['checkpoint'] or 'none written'}",
            "- metrics: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in best["metrics"].items()) + "\n",
        ]
    shown = cols if explicit or OBJECTIVE not in cols else [OBJECTIVE]
    header = ["job", "status"] + swept + shown
    rows = [
        [f"**{j['job']} (best)**" if best is not None and j["job"] == best["job"] else j["job"]]
        + [j.get(h) for h in header[1:]]
        for j in jobs
    ]
    md += ["## Jobs\n", _markdown(header, rows)]
    if shown != cols:
        md += [f"\nAll {len(cols)} metric columns of every job: summary.csv.\n"]
    stats = []
    for c in cols:
        vals = [float(j[c]) for j in done if is_finite_number(j.get(c))]
        if vals:
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            stats.append([c, len(vals), statistics.fmean(vals), sd, min(vals), max(vals)])
    if stats:
        md += ["\n## Metrics over the finished jobs\n", _markdown(["metric", "n", "mean", "std", "min", "max"], stats)]
    opt = root / "optimization_results.yaml"
    if opt.exists():
        md += ["\n## Optuna study\n", "```yaml\n" + opt.read_text() + "```\n"]
    return "\n".join(md)


def _objective(jobs: list[dict[str, Any]], done: list[dict[str, Any]], cols: list[str]) -> Optional[str]:
    """The sweep's objective: the ``optimized_metric`` the finished jobs record, when it is one of their numeric
    metric columns; with no finished job, the one any job records (to say what is missing); else None."""
    if not done:
        return next((j[_OPTIMIZED] for j in jobs if j.get(_OPTIMIZED)), None)
    numeric = [c for c in cols if any(is_finite_number(j.get(c)) for j in done)]
    return next((j[_OPTIMIZED] for j in done if j.get(_OPTIMIZED) in numeric), None)


def _default_y(done: list[dict[str, Any]], cols: list[str]) -> Optional[str]:
    """The jobs' ``optimized_metric`` when they record one, else the first numeric result that is no bookkeeping
    (``epochs``, ...), else the first numeric column."""
    numeric = [c for c in cols if any(is_finite_number(j.get(c)) for j in done)]
    optimized = [j.get(_OPTIMIZED) for j in done if j.get(_OPTIMIZED) in numeric]
    results = [c for c in numeric if c not in _BOOKKEEPING and not c.endswith("n_samples")]
    return (optimized or results or numeric or [None])[0]


def _default_hue(jobs: list[dict[str, Any]], candidates: list[str]) -> Optional[str]:
    """The second swept key of the figure (colour): a categorical one with at most 10 values if any, else the
    first other swept key that varies; None when only one key varies."""

    def categorical(k: str) -> bool:
        return not all(is_finite_number(j.get(k)) for j in jobs if j.get(k) is not None)

    cats = [k for k in candidates if categorical(k) and len({str(j.get(k)) for j in jobs}) <= 10]
    return (cats or candidates)[0] if cats or candidates else None


def best_run_lines(result: dict[str, Any]) -> list[str]:
    """The lines printed at the end of a sweep, from `aggregate_multirun`'s result: jobs finished, the best
    job with its overrides and objective, its directory, checkpoint and first metrics, the summary files; the
    jobs that did not finish.

    Args:
        result: what `aggregate_multirun` returned.

    Returns:
        The lines, without line ends.
    """
    best: Optional[dict[str, Any]] = result.get("best")
    lines = [f"sweep: {result['n_done']} of {result['n_jobs']} jobs finished"]
    unfinished: dict[str, list[str]] = {}
    for r in result["rows"]:
        if r.get("status") != "ok":
            unfinished.setdefault(str(r.get("status")), []).append(str(r["job"]))
    for status, jobs in unfinished.items():
        why = "no metrics.json: failed or stopped" if status == "missing" else f"status {status}"
        lines.append(f"  {why}: job {', '.join(jobs)}")
    if best is None and not result.get("objective"):
        lines.append("  no best run: the jobs record no optimized_metric (.hydra/config.yaml)")
    elif best is None:
        lines.append(f"  no best run: no finished job has a finite {result['objective']}")
    else:
        overrides = " ".join(f"{k}={v}" for k, v in best["overrides"].items())
        shown = [(best["objective"], best["value"])]
        shown += [(k, v) for k, v in best["metrics"].items() if k != best["objective"] and k.startswith("test/")]
        lines += [
            f"best run: job {best['job']} ({overrides or 'no overrides'}): {best['objective']} = {best['value']:.6g}",
            f"  directory:  {best['dir']}",
            f"  checkpoint: {best['checkpoint'] or 'none written'}",
            "  metrics:    " + ", ".join(f"{k} = {v:.4g}" for k, v in shown[:MAX_METRICS]),
        ]
    lines.append(f"  summary:    {result['markdown']} (all jobs: {Path(result['csv']).name})")
    return lines


def print_sweep_summary(root: Path) -> None:
    """Summarise the multirun at ``root`` (`aggregate_multirun`) and print `best_run_lines`; a sweep that cannot
    be summarised (no directory, no job) gets one warning, never an error.

    Args:
        root: the multirun directory (absent: nothing is printed).
    """
    if not root.is_dir():
        return
    try:
        result = aggregate_multirun(root)
    except FlexlearnError as exc:
        log.warning("sweep summary not written: %s", exc)
        return
    print("\n".join(best_run_lines(result)), flush=True)
