"""Kill harness: kill writers and training runs at sampled instants and check what is left on disk.

Each writer trial forks a process that commits new versions of one output over and over — a JSON file
(`flexlearn.atomic.write_json_atomic`), a set of files in a directory (`flexlearn.atomic.atomic_dir`, a manifest
written last), a training checkpoint (`flexlearn.tasks.checkpoints.atomic_checkpoint_io`, the plugin every training
run saves through) — waits for its first commit, then kills it (SIGKILL, SIGTERM or SIGINT) after a random delay, so
that kills land in every phase: serialising, writing the temporary, fsync, the rename. It then checks:

1. the output is one complete version, the last one the writer reported committed or the one it was committing
   (it loads and verifies as a whole: checksums, one version across the set);
2. the next writer starts clean: it removes the killed writer's temporaries and commits a new version.

``--commands N`` adds N kills of real `flexlearn-process`, `flexlearn-export` and `flexlearn-calibrate` runs that
replace an earlier output, at random instants of the run or of the commit, each followed by the next run
(`scripts/kill_commands.py`: the output must load with flexlearn's loaders as the old or the new version).

``--train N`` adds N kills of a real ``flexlearn-train`` run (after its first checkpoint, at a random instant),
each followed by the resume command: the run must end ``status: ok`` in its own directory with every epoch logged
once in order, and the interrupted state must load (``last.ckpt``, strict ``metrics.json``).

Usage: ``python scripts/kill_harness.py --kills 300 --commands 150 --train 4 --seed 0`` prints one JSON object:
trials per kind and signal, the violations (each described; none expected), temporaries left, seconds.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from kill_commands import command_campaign  # noqa: E402

from flexlearn.atomic import atomic_dir, write_json_atomic  # noqa: E402

KINDS = ("json", "dir", "ckpt")
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}
SET_FILES = 5
JSON_ITEMS = 4000
CKPT_WEIGHTS = 200_000


def strict_json(text: str) -> Any:
    """Parse ``text`` as strict JSON (NaN, Infinity refused, as JSON.parse does)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# --- writers: commit version v of an output -----------------------------------------------------------------------


def write_version(kind: str, target: Path, v: int) -> None:
    """Commit version ``v`` of output ``target`` of ``kind`` through flexlearn's writers."""
    if kind == "json":
        payload = list(range(v, v + JSON_ITEMS))
        write_json_atomic(target, {"version": v, "payload": payload, "sum": sum(payload), "nan": float("nan")})
    elif kind == "dir":
        with atomic_dir(target) as tmp:
            digests = {}
            for i in range(SET_FILES):
                data = f"{v}\n".encode() + bytes([65 + i]) * (1000 * (1 + (v + i) % 7))
                (tmp / f"part{i}.bin").write_bytes(data)
                digests[f"part{i}.bin"] = hashlib.sha256(data).hexdigest()
            (tmp / "manifest.json").write_text(json.dumps({"version": v, "files": digests}))
    elif kind == "ckpt":
        import torch  # heavy import only for this kind

        from flexlearn.tasks.checkpoints import atomic_checkpoint_io  # heavy import only for this kind

        state = {"net.w": torch.full((CKPT_WEIGHTS,), float(v))}
        atomic_checkpoint_io().save_checkpoint({"epoch": v, "state_dict": state}, target)
    else:
        raise ValueError(f"unknown kind {kind!r}")


def read_version(kind: str, target: Path) -> int:
    """The version of ``target`` after checking it whole; raise ValueError naming what is wrong."""
    if kind == "json":
        doc = strict_json(target.read_text())
        v = doc["version"]
        if doc["payload"] != list(range(v, v + JSON_ITEMS)) or doc["sum"] != sum(doc["payload"]):
            raise ValueError("payload does not match its version or checksum")
        if doc["nan"] is not None or doc.get("nan_null_reason") != "nan":
            raise ValueError("NaN not written as null with its reason")
        return int(v)
    if kind == "dir":
        manifest = json.loads((target / "manifest.json").read_text())
        names = sorted(p.name for p in target.iterdir() if p.name not in ("manifest.json", ".flexlearn-output"))
        if names != sorted(manifest["files"]):
            raise ValueError(f"files {names} are not the manifest's {sorted(manifest['files'])}")
        for name, digest in manifest["files"].items():
            data = (target / name).read_bytes()
            if hashlib.sha256(data).hexdigest() != digest or data.split(b"\n")[0] != str(manifest["version"]).encode():
                raise ValueError(f"{name} is not of version {manifest['version']}")
        return int(manifest["version"])
    from flexlearn.tasks.checkpoints import read_checkpoint  # heavy import only for this kind

    ckpt = read_checkpoint(target)
    w = ckpt["state_dict"]["net.w"]
    if w.numel() != CKPT_WEIGHTS or not bool((w == float(ckpt["epoch"])).all()):
        raise ValueError("weights do not match the checkpoint's epoch")
    return int(ckpt["epoch"])


def temporaries(target: Path) -> list[str]:
    """Leftover temporaries of writers of ``target`` (``.<name>.tmp-<pid>-...``)."""
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.tmp-"))


def _writer(kind: str, target: str, committed: Any, ready: Any) -> None:
    """Child: commit versions 1, 2, ... of ``target`` until killed; SIGINT/SIGTERM as in the apps."""
    from flexlearn.apps.interrupts import interruptions  # the apps' handlers (imported in the child)

    with interruptions("kill-harness-writer"):
        v = committed.value
        while True:
            v += 1
            write_version(kind, Path(target), v)
            committed.value = v
            ready.set()


# --- one writer trial --------------------------------------------------------------------------------------------


def writer_trial(kind: str, target: Path, sig: str, delay: float) -> dict[str, Any]:
    """Fork a writer of ``target``, kill it with ``sig`` ``delay`` s after its first commit, check the output.

    Returns:
        ``{"kind", "signal", "delay", "exit", "version", "committed", "violation"}``: ``violation`` is '' when
        the output was a complete version in {committed, committed + 1} and the next writer started clean.
    """
    if kind == "ckpt":  # imported before the fork: the child then only writes
        import torch  # heavy import only for this kind

        import flexlearn.tasks.checkpoints  # noqa: F401  (heavy import only for this kind)

        torch.set_num_threads(1)  # no OpenMP thread pool in the parent: a forked child would wait on it for ever
    ctx = mp.get_context("fork")
    committed, ready = ctx.Value("q", 0), ctx.Event()
    if target.exists():
        committed.value = read_version(kind, target)
    start = committed.value
    proc = ctx.Process(target=_writer, args=(kind, str(target), committed, ready), daemon=True)
    proc.start()
    out: dict[str, Any] = {"kind": kind, "signal": sig, "delay": round(delay, 4), "violation": ""}
    try:
        end = time.monotonic() + 60
        while not ready.wait(0.05) and proc.is_alive() and time.monotonic() < end:
            pass
        if not ready.is_set():
            out["violation"] = f"the writer never committed (exit {proc.exitcode})"
            return out
        time.sleep(delay)
        os.kill(proc.pid, SIGNALS[sig])
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
    out.update(exit=proc.exitcode, committed=committed.value)
    try:
        out["version"] = read_version(kind, target)
    except Exception as exc:  # any failure to load whole is what this harness looks for
        out["violation"] = f"output does not load whole after the kill: {type(exc).__name__}: {exc}"
        return out
    if not committed.value <= out["version"] <= committed.value + 1 or out["version"] <= start:
        out["violation"] = f"version {out['version']} is neither the committed {committed.value} nor the next"
        return out
    return _next_writer_starts_clean(kind, target, out)


def _next_writer_starts_clean(kind: str, target: Path, out: dict[str, Any]) -> dict[str, Any]:
    """The next run: one more commit must succeed and leave no temporaries of the killed writer."""
    try:
        write_version(kind, target, out["version"] + 1)
        if read_version(kind, target) != out["version"] + 1:
            out["violation"] = "the next writer's version is not on disk"
    except Exception as exc:  # any failure here is a finding
        out["violation"] = f"the next writer failed: {type(exc).__name__}: {exc}"
    left = temporaries(target)
    if left:
        out["violation"] = f"temporaries left after the next writer: {left}"
    return out


# --- training kills -------------------------------------------------------------------------------------------------

TRAIN_ARGS = ["data.sim.n_poses=400", "data.batch_size=16", "trainer.max_epochs=6", "logger=csv"]


def flexlearn_command(name: str) -> list[str]:
    """The console script ``name`` of the running Python's environment."""
    return [str(Path(sys.executable).with_name(name))]


def _env(root: Path) -> dict[str, str]:
    return dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1", FLEXLEARN_PROGRESS="0")


def _first_checkpoint(root: Path, proc: subprocess.Popen, timeout: float = 240.0) -> Optional[Path]:
    """Wait until the run under ``root`` has written ``last.ckpt``; its path (None if the run ended first)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        found = list((root / "checkpoints").glob("train/runs/*/last.ckpt"))
        if found:
            return found[0]
        time.sleep(0.05)
    return None


def train_trial(root: Path, sig: str, delay: float, args: Optional[list[str]] = None) -> dict[str, Any]:
    """Start ``flexlearn-train`` under ``root``, kill it with ``sig`` ``delay`` s after its first checkpoint, check
    the interrupted state, resume it, check the finished run. Returns the trial record (``violation`` '' if fine)."""
    args = list(args or TRAIN_ARGS)
    out: dict[str, Any] = {"kind": "train", "signal": sig, "delay": round(delay, 3), "violation": ""}
    with open(root / "first.log", "w") as log:
        proc = subprocess.Popen(flexlearn_command("flexlearn-train") + args, cwd=root, env=_env(root), stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip
        last = _first_checkpoint(root, proc)
        if last is not None:
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(SIGNALS[sig])
        proc.wait(300)
    out["exit"] = proc.returncode
    text = (root / "first.log").read_text(errors="replace")
    runs = sorted((root / "logs" / "train" / "runs").glob("*"))
    if last is None or len(runs) != 1:
        out["violation"] = f"no checkpoint or not one run directory ({len(runs)}): {text[-500:]}"
        return out
    run = runs[0]
    out["violation"] = _interrupted_state(run, last, sig, proc.returncode, text)
    if out["violation"]:
        return out
    how = [f"resume={run}"] if sig != "SIGKILL" else [f"ckpt_path={last}"]
    resumed = subprocess.run(flexlearn_command("flexlearn-train") + how, cwd=root, env=_env(root),
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    out["resume_exit"] = resumed.returncode
    out["violation"] = _finished_run(root, run, resumed)
    return out


def _interrupted_state(run: Path, last: Path, sig: str, code: int, text: str) -> str:
    """'' when the killed run left a loadable ``last.ckpt`` and (SIGINT/SIGTERM) the documented exit and record."""
    from flexlearn.tasks.checkpoints import read_checkpoint  # heavy import only for training trials

    try:
        read_checkpoint(last)
    except Exception as exc:  # a truncated checkpoint is the failure looked for
        return f"last.ckpt does not load after {sig}: {exc}"
    finished = (run / "metrics.json").is_file() and strict_json((run / "metrics.json").read_text()).get(
        "status"
    ) == "ok"
    if code == 0 or (finished and code == -SIGNALS[sig]):
        return ""  # the run finished before the signal came (or as the process was exiting): nothing to check
    if sig == "SIGKILL":
        return "" if code == -signal.SIGKILL else f"exit {code} after SIGKILL"
    if code != 128 + SIGNALS[sig] or "Traceback" in text:
        return f"exit {code} after {sig} (expected {128 + SIGNALS[sig]}, no traceback): {text[-500:]}"
    doc = strict_json((run / "metrics.json").read_text())
    if doc.get("status") != "interrupted" or "resume=" not in doc.get("resume", "") or "resume=" not in text:
        return f"metrics.json or the message lacks the interruption and the resume command: {doc}"
    return ""


def _finished_run(root: Path, run: Path, resumed: subprocess.CompletedProcess) -> str:
    """'' when the resumed run finished in ``run`` (no other run directory) with every epoch logged once, in order."""
    if resumed.returncode != 0:
        return f"resume exit {resumed.returncode}: {resumed.stderr[-800:]}"
    runs = sorted((root / "logs" / "train" / "runs").glob("*"))
    if runs != [run]:
        return f"resume made other run directories: {[r.name for r in runs]}"
    doc = strict_json((run / "metrics.json").read_text())
    if doc.get("status") != "ok":
        return f"resumed run status {doc.get('status')!r}"
    with open(run / "csv" / "metrics.csv", newline="") as f:
        epochs = [int(r["epoch"]) for r in csv.DictReader(f) if r.get("val/loss")]
    wanted = list(range(int(doc["epochs"])))
    return "" if epochs == wanted else f"validation epochs in metrics.csv {epochs}, expected {wanted}"


# --- the campaign ---------------------------------------------------------------------------------------------------


def campaign(
    kills: int, train: int, seed: int, work: Path, log: Callable[[str], None] = lambda s: None, commands: int = 0
) -> dict:
    """Run ``kills`` writer trials (kinds and signals in turn, random delays), ``commands`` trials of killed
    commands (`kill_commands.command_campaign`) and ``train`` training trials."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    trials = []
    for i in range(kills):
        kind, sig = KINDS[i % len(KINDS)], list(SIGNALS)[(i // len(KINDS)) % len(SIGNALS)]
        target = work / kind / ("out.json" if kind == "json" else "out" if kind == "dir" else "last.ckpt")
        target.parent.mkdir(parents=True, exist_ok=True)
        trials.append(writer_trial(kind, target, sig, rng.uniform(0.0, 0.06)))
        log(json.dumps(trials[-1]))
    if commands:
        (work / "commands").mkdir(parents=True, exist_ok=True)
        trials += command_campaign(commands, seed, work / "commands", log)
    for i in range(train):
        root = work / f"train{i}"
        root.mkdir(parents=True, exist_ok=True)
        trials.append(train_trial(root, list(SIGNALS)[i % len(SIGNALS)], rng.uniform(0.0, 1.5)))
        log(json.dumps(trials[-1]))
    counts: dict[str, int] = {}
    for t in trials:
        counts[f"{t['kind']}/{t['signal']}"] = counts.get(f"{t['kind']}/{t['signal']}", 0) + 1
    return {
        "trials": len(trials),
        "by_kind_and_signal": counts,
        "violations": [t for t in trials if t["violation"]],
        # command trials that left an export set every loader refuses (each is also a violation)
        "refused_sets": sum(1 for t in trials if t.get("after") == "refused"),
        # command trials signalled while the interpreter was starting, before the command's handlers
        "before_handlers": sum(1 for t in trials if t.get("handlers") is False),
        "seconds": round(time.perf_counter() - t0, 1),
        "seed": seed,
    }


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=300, help="writer trials (JSON file, directory set, checkpoint)")
    ap.add_argument("--commands", type=int, default=0, help="process, export and calibrate runs killed")
    ap.add_argument("--train", type=int, default=3, help="training runs killed and resumed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="folder for the trials (default: a temporary one)")
    ap.add_argument("--verbose", action="store_true", help="one JSON line per trial on stderr")
    args = ap.parse_args(argv)
    if min(args.kills, args.train, args.commands) < 0:
        print("kill_harness: error: --kills, --commands and --train must be >= 0", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kill-harness-", dir=args.work) as work:
        log = (lambda s: print(s, file=sys.stderr)) if args.verbose else (lambda s: None)
        report = campaign(args.kills, args.train, args.seed, Path(work), log, args.commands)
    print(json.dumps(report, indent=1))
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
