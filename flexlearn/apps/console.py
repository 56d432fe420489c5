"""What the training and evaluation apps print: the resolved config as a tree when a run starts (also saved
as ``config_tree.txt`` in the run directory) and the test metrics as a table when it ends.

The tree is drawn with rich when it is installed (colours on a terminal), as plain YAML otherwise. Multirun
jobs print one line each instead (their overrides, then their result); ranks > 0 of a DDP run print nothing.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flexlearn.atomic import atomic_path
from flexlearn.config import is_rank_zero, job_label

TREE_ORDER = ("data", "model", "task", "callbacks", "logger", "trainer", "paths")
TREE_WIDTH = 110
TEST_ROWS = (
    ("test/ang_err_median_deg", "median error", "°"),
    ("test/ang_err_p95_deg", "p95 error", "°"),
    ("test/ang_err_rms_deg", "RMS error", "°"),
    ("test/ang_err_mean_deg", "mean error", "°"),
    ("test/invalid_fraction", "invalid fraction", "%"),
)


def _sections(cfg: DictConfig) -> list[tuple[str, str]]:
    """(name, YAML) per config group in `TREE_ORDER`, then the other groups, then the top-level values;
    resolved where possible (a value that cannot be resolved yet is shown as written)."""

    def yaml_of(node: Any) -> str:
        try:
            return OmegaConf.to_yaml(node, resolve=True)
        except Exception:  # e.g. a mandatory value (???) not given: shown as written
            return OmegaConf.to_yaml(node)

    keys = [str(k) for k in cfg.keys() if k != "hydra"]
    groups = [k for k in TREE_ORDER if k in keys and isinstance(cfg[k], DictConfig)]
    groups += [k for k in keys if k not in groups and isinstance(cfg.get(k), DictConfig)]
    scalars = [k for k in keys if k not in groups]
    out = [(str(k), yaml_of(cfg[k])) for k in groups]
    if scalars:
        out.append(("(top level)", yaml_of(OmegaConf.masked_copy(cfg, scalars))))
    return out


def config_tree(cfg: DictConfig, colour: bool = False) -> str:
    """The resolved config as text: a rich tree when rich is installed, else YAML with one commented header per group.

    Args:
        cfg: the resolved config.
        colour: whether the tree carries ANSI colours.
    """
    sections = _sections(cfg)
    try:
        from rich.console import Console  # optional dependency: plain YAML without it
        from rich.syntax import Syntax  # optional dependency
        from rich.tree import Tree  # optional dependency
    except ImportError:
        return "".join(f"# {name}\n{text}" for name, text in sections)
    tree = Tree("CONFIG", style="dim", guide_style="dim")
    for name, text in sections:
        tree.add(name, style="bold", guide_style="dim").add(Syntax(text.rstrip("\n"), "yaml", theme="ansi_dark"))
    buf = io.StringIO()
    Console(
        file=buf, width=TREE_WIDTH, force_terminal=colour, color_system="standard" if colour else None, highlight=False
    ).print(tree)
    return buf.getvalue()


def show_config(cfg: DictConfig, output_dir: Optional[str | Path]) -> None:
    """Print the config tree (a multirun job: its overrides only) and save it as ``config_tree.txt``.

    Args:
        cfg: the resolved config.
        output_dir: the run directory the tree is saved in (None: not saved).
    """
    if not is_rank_zero():
        return
    label = job_label()
    if label:
        overrides = " ".join(HydraConfig.get().overrides.task) or "(no overrides)"
        print(f"[{label}] {overrides}", flush=True)
    else:
        colour = bool(getattr(sys.stdout, "isatty", lambda: False)())
        print(config_tree(cfg, colour=colour), end="", flush=True)
    if output_dir:
        path = Path(output_dir) / "config_tree.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(config_tree(cfg), encoding="utf-8")


def _value(metrics: Mapping[str, Any], key: str, unit: str) -> Optional[str]:
    v = metrics.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return f"{100 * v:.2f} %" if unit == "%" else f"{v:.3f}{unit}"


def metrics_table(metrics: Mapping[str, Any], optimized_metric: Optional[str] = None) -> str:
    """The end-of-run summary: test metrics (median, p95, RMS, mean angular error, invalid fraction) and the
    optimised metric; an identification (no test metrics) shows its optimised metric and relative errors.

    Args:
        metrics: the run's metrics (``metrics.json``).
        optimized_metric: the key returned to sweepers, shown beside the test metrics.
    """
    lines = []
    rows = [(name, text) for key, name, unit in TEST_ROWS if (text := _value(metrics, key, unit)) is not None]
    if rows:
        n = metrics.get("test/n_samples")
        lines.append(f"test metrics ({int(n)} samples)" if isinstance(n, (int, float)) else "test metrics")
        lines += [f"  {name:<18s}{text:>10s}" for name, text in rows]
    extra = [optimized_metric] if optimized_metric else []
    test_keys = {key for key, _, _ in TEST_ROWS}
    shown = [(k, metrics[k]) for k in extra if isinstance(metrics.get(k), (int, float)) and k not in test_keys]
    identified = identified_rows(metrics)
    if shown or identified:
        lines.append("optimised metric (returned to sweepers)" if rows else "identification")
        lines += [f"  {k:<30s}{v:>12.5g}" for k, v in shown]
        lines += identified
    return "\n".join(lines)


def _number(metrics: Mapping[str, Any], key: str) -> Optional[float]:
    v = metrics.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def identified_rows(metrics: Mapping[str, Any]) -> list[str]:
    """One line per identified parameter: ``name  value ± 1σ`` with the relative error against the simulated truth
    when there is one, or a note when the data could not identify it (``id/<name>``, ``_std``, ``_rel_err``,
    ``_identifiable`` in the metrics).

    Args:
        metrics: the run's metrics (``metrics.json``).
    """
    names = sorted(k[3:-4] for k in metrics if k.startswith("id/") and k.endswith("_std") and not k.endswith("rel_std"))
    out = []
    for n in names:
        value, std = _number(metrics, f"id/{n}"), _number(metrics, f"id/{n}_std")
        if value is None:
            continue
        text = f"  {n:<18s}{value:>12.5g} ± {std:.3g}" if std is not None else f"  {n:<18s}{value:>12.5g}"
        rel = _number(metrics, f"id/{n}_rel_err")
        if rel is not None:
            text += f"   ({100 * rel:.2f} % from the truth)"
        if _number(metrics, f"id/{n}_identifiable") == 0.0:
            text += "   not identifiable from these data (see the Hessian note in metrics.json)"
        out.append(text)
    return out


def describe_files(paths: Any) -> str:
    """'a.png, b.png in <dir>' for files of one directory, else the paths joined by ', '.

    Args:
        paths: paths, or a mapping whose values are paths.
    """
    paths = sorted(str(p) for p in (paths.values() if isinstance(paths, Mapping) else paths or []))
    parents = {str(Path(p).parent) for p in paths}
    if len(parents) == 1:
        return ", ".join(Path(p).name for p in paths) + f" in {parents.pop()}"
    return ", ".join(paths)


def show_result(
    metrics: Mapping[str, Any],
    optimized_metric: Optional[str] = None,
    first: Optional[Mapping[str, Any]] = None,
    **listed: Any,
) -> None:
    """Print each of ``first`` (name: value; the figures a reader must see first), the metrics table, each of
    ``listed``, then the run directory as the last line (scripts read it); a multirun job prints one line.

    Args:
        metrics: the run's metrics (``metrics.json``, with its ``output_dir``).
        optimized_metric: the key returned to sweepers.
        first: name → text printed before the table (empty texts are skipped).
        **listed: name → text printed after the table (empty texts are skipped).
    """
    if not is_rank_zero():
        return
    out_dir = metrics.get("output_dir", "")
    label = job_label()
    if label:
        parts = [f"{name} {text}" for key, name, unit in TEST_ROWS if (text := _value(metrics, key, unit))]
        if optimized_metric and isinstance(metrics.get(optimized_metric), (int, float)):
            parts.append(f"{optimized_metric} {metrics[optimized_metric]:.5g}")
        print(f"[{label}] " + ", ".join(parts) + f" -> {out_dir}", flush=True)
        return
    table = metrics_table(metrics, optimized_metric)
    for name, value in (first or {}).items():
        if value:
            print(f"{name}: {value}")
    print("\n" + table if table else "", flush=True)
    for name, value in listed.items():
        if value:
            print(f"{name}: {value}")
    print("run directory:")
    print(out_dir, flush=True)


def show_outcome(lines: list[str], directory: str | Path) -> None:
    """A command's closing words for a person: its summary lines, then ``run directory:`` and the directory as
    the last line (scripts read it), as the training apps end.

    Args:
        lines: the summary (what was written, the figures that matter, the next step).
        directory: where the outputs are.
    """
    print("\n".join(lines))
    print("run directory:")
    print(str(directory), flush=True)
