"""Kill trials of real commands: `flexlearn-process`, `flexlearn-export` and `flexlearn-calibrate` killed at
sampled instants while they replace an earlier output, then checked as a user's next step would load it.

Each command has two versions of its output, told apart by what they were made from: the dataset of raw sweep
1 or 2 (`provenance.raw_path`), the export set of checkpoint 1 or 2, the calibration file for checkpoint 1 or 2
(`model_fingerprint`). A trial starts from a complete version on disk, starts the command that writes the other
one, and kills it (SIGKILL, SIGTERM or SIGINT) either at a uniformly random instant of its run (start-up,
reading, computing, writing) or right when its first temporary file appears (the commit: fsync and renames).
It then checks:

1. what is on disk loads with flexlearn's own loader (`DirectionDataset.load`, `verify_manifest` of every file
   of the export set, `load_calibration`) and is the old or the new version, never a mix, a truncation or a set
   that every loader refuses (``refused``: a SIGKILL inside an export's renames whose commit the loader could not
   complete);
2. SIGINT and SIGTERM end the command with 128 + the signal and one ``interrupted by`` line, no traceback, that
   names the run's ``status.json``, which says ``interrupted`` by that signal; a signal sent while the interpreter
   was still starting (the command's handlers not yet in place, read from /proc: ``handlers: false``) takes its
   default action, and only the old version's staying whole is checked
   (exit 0, or the signal's own status as the interpreter exits, when it had finished: the new version whole);
3. the next run of the command starts clean: it succeeds, writes the new version and leaves no temporaries.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

COMMANDS = ("process", "export", "calibrate")
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}
EXPORT_FILES = ("direction_model.pt", "direction_model.pt2")
SIM_POSES = 200
TRAIN_EPOCHS = 2


def console(name: str) -> list[str]:
    """The console script ``name`` of the running Python's environment."""
    return [str(Path(sys.executable).with_name(name))]


def command_env(root: Path) -> dict[str, str]:
    """The environment of a command run under ``root`` (one thread, no progress bars)."""
    return dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1", FLEXLEARN_PROGRESS="0")


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=root, env=command_env(root), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr[-1500:]}")
    return done


@dataclass
class Inputs:
    """Two raw sweeps and two checkpoints under ``root``: the material of the two versions of every output."""

    root: Path
    raw: list[Path] = field(default_factory=list)
    ckpt: list[Path] = field(default_factory=list)

    @classmethod
    def make(cls, root: Path) -> "Inputs":
        """Train a tiny model, then `from_checkpoint` (about a minute on one core)."""
        args = [f"data.sim.n_poses={2 * SIM_POSES}", "data.batch_size=16", f"trainer.max_epochs={TRAIN_EPOCHS}"]
        _run(console("flexlearn-train") + args + ["logger=csv"], root)
        (ckpt,) = (root / "checkpoints").glob("train/runs/*/last.ckpt")
        return cls.from_checkpoint(root, ckpt)

    @classmethod
    def from_checkpoint(cls, root: Path, ckpt: Path) -> "Inputs":
        """Two simulated sweeps (seeds 1, 2) and two checkpoints: ``ckpt`` and a copy with every weight moved by
        1 % (another model of the same shape), under ``root``."""
        import torch  # heavy import off the harness's start-up path

        inputs = cls(root)
        for seed in (1, 2):
            raw = root / f"raw{seed}"
            _run(
                console("flexlearn-simulate") + [f"sim.n_poses={SIM_POSES}", f"sim.seed={seed}", f"output={raw}"], root
            )
            inputs.raw.append(raw)
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        state["state_dict"] = {k: v * 1.01 if v.is_floating_point() else v for k, v in state["state_dict"].items()}
        other = root / "other" / ckpt.name
        other.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, other)
        inputs.ckpt = [ckpt, other]
        return inputs

    def command(self, kind: str, version: int, target: Path) -> list[str]:
        """The command line that writes version ``version`` (1 or 2) of ``kind``'s output ``target`` (calibrate: a
        rotation fit, which the tiny model's residuals cannot push outside what the loaders accept)."""
        i = version - 1
        if kind == "process":
            return console("flexlearn-process") + [f"input={self.raw[i]}", f"output={target}"]
        if kind == "export":
            return console("flexlearn-export") + [f"ckpt_path={self.ckpt[i]}", f"out_dir={target}"]
        if kind == "calibrate":
            return console("flexlearn-calibrate") + [
                f"ckpt_path={self.ckpt[i]}", f"inputs=[{self.raw[0]}]", f"output={target}", "kind=rotation",
            ]  # fmt: skip
        raise ValueError(f"unknown command kind {kind!r}")

    def version_of(self, kind: str, target: Path) -> int:
        """The version (1 or 2) of ``target``, loaded whole by flexlearn's loader; ValueError naming the problem
        (an export set that every loader refuses: ``ValueError('refused: ...')``)."""
        if kind == "process":
            from flexlearn.data.dataset import DirectionDataset  # heavy import only for this kind

            try:
                raw = DirectionDataset.load(target).meta["provenance"]["raw_path"]
            except Exception as exc:  # any failure to load is the finding
                raise ValueError(f"dataset does not load: {exc}") from exc
            return self._index(self.raw, raw)
        if kind == "export":
            return self._export_version(target)
        from flexlearn.runtime.bundle_inputs import load_calibration  # heavy import only for this kind

        try:
            load_calibration(target, 1)
        except Exception as exc:  # any failure to load is the finding
            raise ValueError(f"calibration file does not load: {exc}") from exc
        return self._index(self.ckpt, _json(target)["checkpoint"])

    def _export_version(self, folder: Path) -> int:
        from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, verify_manifest

        accepted, refused = {}, {}
        for name in EXPORT_FILES:
            try:
                verify_manifest(folder / name)  # the file's hash and its siblings' (the whole set)
                accepted[name] = self._index(self.ckpt, _torchscript_checkpoint(folder / name))
            except (UntrustedArtifactError, OSError, KeyError, ValueError) as exc:
                refused[name] = str(exc)
        if refused and accepted:
            raise ValueError(f"mixed: {sorted(accepted)} accepted, {sorted(refused)} refused ({refused})")
        if refused:
            raise ValueError(f"refused: every file of the set is refused ({next(iter(refused.values()))})")
        if len(set(accepted.values())) != 1:
            raise ValueError(f"mixed: the accepted files are of versions {accepted}")
        return next(iter(accepted.values()))

    def _index(self, paths: list[Path], named: str) -> int:
        for i, path in enumerate(paths, 1):
            if Path(self.root, named).resolve() == path.resolve():
                return i
        raise ValueError(f"made from {named!r}, which is neither input")


def _json(path: Path) -> dict:
    import json

    return json.loads(path.read_text())


def _torchscript_checkpoint(path: Path) -> str:
    """The ``checkpoint`` an export file was made from (its metadata.json, read from the zip archive)."""
    import json
    import zipfile

    with zipfile.ZipFile(path) as z:
        meta = [n for n in z.namelist() if n.endswith("extra/metadata.json")]
        if not meta:
            raise ValueError(f"{path.name}: no extra/metadata.json")
        return str(json.loads(z.read(meta[0]))["checkpoint"])


def temporaries(kind: str, target: Path) -> list[str]:
    """Leftover temporaries (``.<name>.tmp-...``) of writers of ``target``."""
    if kind == "export":
        folder, names = target, EXPORT_FILES
    else:
        folder, names = target.parent, (target.name,)
    if not folder.is_dir():
        return []
    return sorted(
        p.name for p in folder.iterdir() if any(p.name.startswith(f".{n}") for n in names) and ".tmp-" in p.name
    )


def _handles_sigterm(pid: int) -> bool:
    """Whether process ``pid`` catches SIGTERM (``SigCgt`` of /proc/<pid>/status): flexlearn's console scripts put
    their SIGINT and SIGTERM handlers in place together, once the interpreter has started (`flexlearn.apps.launch`);
    before that a signal takes its default action (SIGINT: Python's KeyboardInterrupt). True when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except (OSError, ValueError):
        pass
    return True


def _wait_for_commit(kind: str, target: Path, proc: subprocess.Popen, timeout: float = 120.0) -> bool:
    """Poll (every ms) until the command's first temporary appears; False if it ended first."""
    end = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < end:
        if temporaries(kind, target):
            return True
        time.sleep(0.001)
    return False


def command_trial(inputs: Inputs, kind: str, target: Path, sig: str, when: str, delay: float) -> dict[str, Any]:
    """Kill the command writing the other version of ``target`` with ``sig``; check what is left and the next run.

    Args:
        inputs: the two versions' material.
        kind: 'process', 'export' or 'calibrate'.
        target: the output (a complete version on disk).
        sig: 'SIGKILL', 'SIGTERM' or 'SIGINT'.
        when: 'run' (``delay`` s after the start) or 'commit' (``delay`` s after the first temporary appears).
        delay: seconds.

    Returns:
        ``{"kind", "signal", "when", "delay", "exit", "before", "after", "violation"}``: ``after`` is the version
        on disk after the kill (1, 2 or 'refused'); ``violation`` is '' when every check held.
    """
    before = inputs.version_of(kind, target)
    new = 3 - before
    out: dict[str, Any] = {"kind": kind, "signal": sig, "when": when, "delay": round(delay, 4), "before": before}
    out["violation"] = ""
    proc = subprocess.Popen(inputs.command(kind, new, target), cwd=inputs.root, env=command_env(inputs.root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        if when == "run" or _wait_for_commit(kind, target, proc):
            time.sleep(delay)
            if proc.poll() is None:
                out["handlers"] = _handles_sigterm(proc.pid)
                proc.send_signal(SIGNALS[sig])
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out["exit"] = proc.returncode
    try:
        out["after"] = inputs.version_of(kind, target)
    except ValueError as exc:
        out["after"] = "refused" if str(exc).startswith("refused") else "broken"
        out["violation"] = f"after {sig}: {exc}"
        return out
    finished = proc.returncode == 0 or (out["after"] == new and proc.returncode == -SIGNALS[sig])
    if finished and out["after"] != new:  # (-signal: it came as the interpreter exited, its handlers gone)
        out["violation"] = f"the command finished but version {out['after']} is on disk, not {new}"
    elif finished or not out.get("handlers", True):
        pass  # (no handlers yet: the interpreter was starting; nothing was opened, the old version must stay)
    elif sig != "SIGKILL" and proc.returncode != 128 + SIGNALS[sig]:
        out["violation"] = f"exit {proc.returncode} after {sig} (expected {128 + SIGNALS[sig]}): {err[-600:]}"
    elif sig != "SIGKILL" and ("Traceback" in err or "interrupted by" not in err):
        out["violation"] = f"no one-line interruption message after {sig}: {err[-600:]}"
    elif sig != "SIGKILL":
        out["violation"] = _interrupted_status(err, sig, inputs.root, proc.pid)
    if not out["violation"]:
        out["violation"] = _next_run_starts_clean(inputs, kind, target, new)
    return out


def _interrupted_status(err: str, sig: str, root: Path, pid: int) -> str:
    """'' when the interruption line names the run's ``status.json`` and that file (strict JSON) says so, or when
    the command stopped before it made its run directory (``<date>_<time>_<pid>-<tag>`` under ``root/logs``)."""
    import json
    import re

    runs = [p for p in root.glob("logs/*/runs/*") if f"_{pid}-" in p.name]
    found = re.search(r"status in (\S+status\.json)", err)
    if not found:
        return f"run directory {runs[0]} made, but the line names no status.json: {err[-400:]}" if runs else ""

    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON ({name})")

    try:
        record = json.loads(Path(found.group(1)).read_text(), parse_constant=refuse)
    except (OSError, ValueError) as exc:
        return f"{found.group(1)}: {exc}"
    if record.get("status") == "ok" and "the run had ended (ok)" in err:
        return ""  # the signal came as the finished run wrote its status: its outputs are checked by the caller
    if record.get("status") != "interrupted" or record.get("signal") != sig:
        return f"{found.group(1)} says {record.get('status')!r} / {record.get('signal')!r}, not interrupted by {sig}"
    return ""


def _next_run_starts_clean(inputs: Inputs, kind: str, target: Path, new: int) -> str:
    """'' when the command, run again to the end, writes version ``new`` and leaves no temporaries."""
    done = subprocess.run(inputs.command(kind, new, target), cwd=inputs.root, env=command_env(inputs.root),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if done.returncode != 0:
        return f"the next run failed (exit {done.returncode}): {done.stderr[-600:]}"
    try:
        if inputs.version_of(kind, target) != new:
            return f"the next run did not leave version {new}"
    except ValueError as exc:
        return f"the next run's output does not load: {exc}"
    left = temporaries(kind, target)
    return f"temporaries left after the next run: {left}" if left else ""


def command_campaign(
    kills: int, seed: int, work: Path, log: Callable[[str], None] = lambda s: None, inputs: Optional[Inputs] = None
) -> list[dict[str, Any]]:
    """``kills`` command trials (commands, signals and kill instants in turn, random delays) under ``work``.

    Args:
        kills: number of trials.
        seed: the random delays' seed.
        work: a folder for the inputs and outputs.
        log: called with each trial's record as one JSON line.
        inputs: material made earlier (None: made here, about a minute).

    Returns:
        The trial records (`command_trial`).
    """
    import json

    rng = random.Random(seed)
    inputs = inputs or Inputs.make(work)
    targets = {"process": work / "dataset.parquet", "export": work / "export", "calibrate": work / "calibration.json"}
    durations = {}
    for kind, target in targets.items():  # version 1 on disk, and how long a whole run takes
        t0 = time.perf_counter()
        _run(inputs.command(kind, 1, target), inputs.root)
        durations[kind] = time.perf_counter() - t0
    trials = []
    for i in range(kills):
        kind = COMMANDS[i % len(COMMANDS)]
        sig = list(SIGNALS)[(i // len(COMMANDS)) % len(SIGNALS)]
        when = ("run", "commit")[(i // (len(COMMANDS) * len(SIGNALS))) % 2]
        delay = rng.uniform(0.0, 1.1 * durations[kind]) if when == "run" else rng.uniform(0.0, 0.05)
        trials.append(command_trial(inputs, kind, targets[kind], sig, when, delay))
        log(json.dumps(trials[-1]))
    return trials
