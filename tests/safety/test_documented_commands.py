"""Every `flexlearn-*` command written in README.md and docs/ is accepted as written.

Each command line in a fenced code block is extracted; placeholders (``<raw dir>``) become dummy paths;
its overrides are composed against the app's own config (the step where a key that needs ``+`` or does not
exist fails). The cheap commands are then also run for real in an empty directory.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
APPS = REPO / "flexlearn" / "apps"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _config_names() -> dict[str, str]:
    """Console script name → Hydra config name, read from pyproject.toml and the app modules."""
    out = {}
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        m = re.match(r'^(flexlearn-[a-z]+) = "flexlearn\.apps\.launch:([a-z_]+)"', line)
        if m:
            src = (APPS / f"{m.group(2)}.py").read_text()
            found = re.search(r'config_name="([a-z_]+)"|hydra_app\("[^"]+", "([a-z_]+)"', src)
            # an argparse app (no Hydra config): "module:<name>", its build_parser() checks the arguments
            out[m.group(1)] = (found.group(1) or found.group(2)) if found else f"module:{m.group(2)}"
    return out


def _is_pattern(command: str) -> bool:
    """A schematic command (elided with '...'/'…', or a placeholder inside a name) is not run as written."""
    return "..." in command or "…" in command or bool(re.search(r"[\w]<[^>]*>|<[^>]*>[\w]", command))


def documented_commands() -> list[tuple[str, str]]:
    r"""(where, command) for every flexlearn-* line of a fenced code block and every inline `flexlearn-…`
    span of the text (tables); '\\' continuations joined, comments and diagrams left out."""
    found = []
    for doc in DOCS:
        in_block, pending = False, ""
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                in_block, pending = not in_block, ""
                continue
            if not in_block:
                found += [
                    (f"{doc.name}:{i}", c.strip())
                    for c in re.findall(r"`(flexlearn-[a-z]+(?: [^`]*)?)`", line)
                    if not _is_pattern(c)
                ]
                continue
            if "──" in line:  # a data-flow diagram, not a command
                continue
            line = pending + re.split(r"\s+#\s", line)[0].strip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if re.match(r"^flexlearn-[a-z]+( |$)", line) and not _is_pattern(line):
                found.append((f"{doc.name}:{i}", line))
    return found


COMMANDS = documented_commands()
CONFIG = _config_names()


def _argv(command: str) -> tuple[str, list[str]]:
    command = re.sub(r"<[^>]*>", "placeholder", command)
    app, *args = shlex.split(command)
    return app, args


def test_the_docs_hold_commands_of_every_kind():
    apps = {_argv(c)[0] for _, c in COMMANDS}
    assert {
        "flexlearn-simulate",
        "flexlearn-process",
        "flexlearn-train",
        "flexlearn-ingest",
        "flexlearn-plan",
        "flexlearn-report",
        "flexlearn-cosserat",
        "flexlearn-cpr",
        "flexlearn-aggregate",
    } <= apps, apps


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_composes_as_written(where, command):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import flexlearn.apps.runner as runner

    app, args = _argv(command)
    assert app in CONFIG, f"{where}: '{app}' is not a console script of this package"
    if CONFIG[app].startswith("module:"):
        import importlib

        importlib.import_module(f"flexlearn.apps.{CONFIG[app][7:]}").build_parser().parse_args(args)
        return
    from flexlearn.jobs.runs import RESUMABLE_APPS

    overrides = []
    for a in args:
        if a == "-m":
            continue
        if a.startswith("resume=") and app in RESUMABLE_APPS:
            continue  # expanded by the app before composing (flexlearn.jobs.runs.resume_arguments)
        key, _, value = a.partition("=")
        if "," in value and not value.startswith("["):  # a sweep: compose with its first value
            value = value.split(",")[0]
        overrides.append(f"{key}={value}")
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=runner.CONF_DIR):
        compose(config_name=CONFIG[app], overrides=overrides, return_hydra_config=True)
    GlobalHydra.instance().clear()


RUN_FOR_REAL = [
    "flexlearn-simulate sim.n_poses=2000",
    "flexlearn-plan plan.n_poses=2000 output=targets.csv",
    "flexlearn-plan plan.n_poses=2000 plan.order=nearest output=targets.yaml",
]


@pytest.mark.parametrize("command", RUN_FOR_REAL)
def test_cheap_documented_commands_run_as_written(command, tmp_path):
    assert command in [c for _, c in COMMANDS], f"'{command}' is no longer in the docs"
    app, args = _argv(command)
    module = {"flexlearn-simulate": "simulate", "flexlearn-plan": "plan"}[app]
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", f"flexlearn.apps.{module}", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# The data-dependent commands of README.md and docs/ingest.md, run as written in one working directory after
# the recordings they name are laid out; training commands get a small size appended (one epoch).
WALKTHROUGH = [
    "flexlearn-plan plan.n_poses=2000 plan.max_colatitude_deg=29.5 plan.mechanical_limit_deg=30 output=targets.csv",
    "flexlearn-ingest input=recordings/2026-03-02_rig output=data/monday ingest=rig_ros2",
    "flexlearn-ingest input=dump.csv output=data/serial ingest=serial",
    "flexlearn-report sessions=[data/monday,data/tuesday] output=reports/week",
    "flexlearn-plan plan_file=targets.csv plan.n_cells=250 compare=[data/monday] coverage_dir=reports/coverage",
    "flexlearn-train data=dataset data.path=data/monday",
    "flexlearn-process input=path/to/raw_sweep output=datasets/my_sweep.parquet",
    "flexlearn-train data=dataset data.path=datasets/my_sweep.parquet",
    "flexlearn-train data=raw data.path=path/to/raw_sweep",
]
SMALL_TRAINING = ["trainer.max_epochs=1", "data.batch_size=64"]


def _lay_out_recordings(root: Path) -> None:
    """recordings/2026-03-02_rig (rosbag2), dump.csv (serial), data/tuesday, path/to/raw_sweep: 60 poses each."""
    from flexlearn.config import from_dict
    from flexlearn.ingest import topic_map
    from flexlearn.ingest.recording import ingest_recording
    from flexlearn.ingest.writers import sweep_messages, write_rosbag, write_serial
    from flexlearn.sensing.streams import quantize_times
    from flexlearn.sim.rig import simulate_sweep
    from flexlearn.sim.rig_config import RigConfig

    raw = quantize_times(simulate_sweep(from_dict(RigConfig, {"n_poses": 60, "seed": 4})))
    msgs, store = sweep_messages(raw, topic_map("rig_ros2"))
    write_rosbag(root / "recordings" / "2026-03-02_rig", msgs, store, "mcap")
    write_serial(raw, root / "dump.csv", topic_map("serial"), "csv")
    ingest_recording(root / "recordings" / "2026-03-02_rig", root / "data" / "tuesday", topic_map("rig_ros2"))
    raw.save(root / "path" / "to" / "raw_sweep")


@pytest.mark.slow  # ≈ 40 s: run by CI after the default suite (.ci/run)
def test_documented_walkthrough_runs_as_written(tmp_path):
    documented = [c for _, c in COMMANDS]
    for command in WALKTHROUGH:
        assert command in documented, f"'{command}' is no longer in the docs"
    _lay_out_recordings(tmp_path)
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1", WANDB_MODE="offline")
    for command in WALKTHROUGH:
        app, args = _argv(command)
        if app == "flexlearn-train":
            args += SMALL_TRAINING
        proc = subprocess.run(
            [str(Path(sys.executable).with_name(app)), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "data" / "monday" / "dataset.parquet").is_file()
    assert (tmp_path / "reports" / "week" / "report.md").is_file()
    assert (tmp_path / "datasets" / "my_sweep.parquet").is_file()
