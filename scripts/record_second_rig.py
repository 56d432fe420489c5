"""Record a simulated second rig as other loggers would (MCAP, sqlite3 bag, serial CSV, JSON lines), and score a
model trained on such a recording against the Cramér–Rao bound.

``record`` simulates a sweep of a rig described by a ``conf/data`` option (default ``sim_rig_b``: a four-layer
coil, a universal joint, separate datasheet chips; ``sim_rig_b_weak``: its 25 µT coil), writes it through each
logger of ``tests/rigs/loggers.py`` (none of flexlearn's writers) into ``--out``/<format>/, keeps the
simulator's own sweep with its truth in ``--out``/truth/, and prints JSON with the flexlearn-ingest command of
each recording:

    python scripts/record_second_rig.py record --out rec [--rig sim_rig_b] [--poses 15000] [--seed 0]
                                               [--module-seed -1] [--formats mcap,sqlite3,csv,jsonl]

``score`` measures a trained checkpoint on an ingested recording of such a sweep: the bound of
`flexlearn.sim.direction_bound.recording_bound` on the dataset's test poses within the trained cap, from the
truth kept by ``record``, and the model's error on the same poses, their ratio (``efficiency``):

    python scripts/record_second_rig.py score --truth rec/truth --dataset ingested/dataset.parquet --ckpt CKPT

Bad input (an unknown rig, a missing directory, a file that is not a checkpoint) exits with status 2 and one
line naming it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/rigs/loggers.py: the loggers live with the tests that use them


def fail(message: str) -> None:
    print(f"record_second_rig: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def rig_config(rig: str, overrides: list[str]) -> dict:
    """The ``sim`` block of ``conf/data/<rig>.yaml`` (with Hydra overrides) as a plain dict."""
    from hydra import compose, initialize_config_dir  # heavy imports only once the arguments are parsed
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    options = sorted(p.stem for p in (ROOT / "flexlearn" / "conf" / "data").glob("sim_rig*.yaml"))
    if rig not in options:
        fail(f"--rig {rig!r}: not a simulated rig of flexlearn/conf/data (one of {options})")
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "flexlearn" / "conf")):
            cfg = compose("train", [f"data={rig}", *overrides])
    except HydraException as exc:
        fail(f"--rig {rig}: {str(exc).splitlines()[0]}")
    return OmegaConf.to_container(cfg.data.sim, resolve=True)


def record(args: argparse.Namespace) -> dict:
    """Simulate the rig, write its truth and each recording; the commands that ingest them."""
    from flexlearn.atomic import atomic_dir
    from flexlearn.errors import FlexlearnError
    from flexlearn.sim.rig import simulate_sweep
    from tests.rigs.loggers import WRITERS, LoggerOptions

    formats = [f for f in args.formats.split(",") if f]
    unknown = [f for f in formats if f not in WRITERS]
    if unknown or not formats:
        fail(f"--formats {args.formats!r}: expected a comma-separated subset of {sorted(WRITERS)}")
    if args.poses < 10:
        fail(f"--poses {args.poses}: at least 10 poses")
    out = Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        fail(f"--out {out}: exists and is not empty (recordings are never overwritten)")
    sim = rig_config(args.rig, [])
    sim.update(n_poses=args.poses, seed=args.seed, module_seed=args.module_seed)
    try:
        raw = simulate_sweep(sim)
    except FlexlearnError as exc:
        fail(f"--rig {args.rig}: {exc}")
    with atomic_dir(out) as tmp:  # an interrupted run leaves no half-written recordings
        raw.save(tmp / "truth")
        result = {"rig": args.rig, "poses": args.poses, "truth": str(out / "truth"), "recordings": {}}
        for fmt in formats:
            rec = WRITERS[fmt](raw, tmp / fmt, LoggerOptions(seed=args.seed))
            cmd = [arg.replace(str(tmp), str(out)) for arg in rec.ingest_args()]
            cmd = ["flexlearn-ingest", *cmd, f"input={out / rec.path.relative_to(tmp)}"]
            cmd.append(f"output={out / 'ingested' / fmt}")
            result["recordings"][fmt] = {
                "path": str(out / rec.path.relative_to(tmp)),
                "ingest": " ".join(shlex.quote(c) for c in cmd),
            }
    return result


def score(args: argparse.Namespace) -> dict:
    """The bound and the model's error on the dataset's test poses within the trained cap."""
    from flexlearn.data.dataset import DirectionDataset
    from flexlearn.errors import FlexlearnError
    from flexlearn.sensing.streams import RawSweep
    from flexlearn.sim.direction_bound import model_efficiency, recording_bound
    from flexlearn.tasks.checkpoints import load_direction_model

    for flag, path in (("--truth", args.truth), ("--dataset", args.dataset), ("--ckpt", args.ckpt)):
        if not Path(path).exists():
            fail(f"{flag} {path}: does not exist")
    try:
        truth = RawSweep.load(args.truth)
        ds = DirectionDataset.load(args.dataset)
    except FlexlearnError as exc:
        fail(str(exc))
    try:
        out, rows = recording_bound(truth, ds)
    except FlexlearnError as exc:
        fail(f"--dataset {args.dataset} against --truth {args.truth}: {exc}")
    try:
        model, _ = load_direction_model(args.ckpt)
    except FlexlearnError as exc:
        fail(f"--ckpt {args.ckpt}: {exc}")
    out.update(model_efficiency(model, ds, rows, out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="simulate the rig and write its recordings")
    rec.add_argument("--out", required=True)
    rec.add_argument("--rig", default="sim_rig_b")
    rec.add_argument("--poses", type=int, default=15000)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--module-seed", type=int, default=-1)
    rec.add_argument("--formats", default="mcap,sqlite3,csv,jsonl")
    sc = sub.add_parser("score", help="a trained model against the Cramér–Rao bound")
    sc.add_argument("--truth", required=True)
    sc.add_argument("--dataset", required=True)
    sc.add_argument("--ckpt", required=True)
    args = ap.parse_args()
    try:
        print(json.dumps(record(args) if args.command == "record" else score(args), indent=2))
    except KeyboardInterrupt:
        print("record_second_rig: interrupted; nothing written", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
