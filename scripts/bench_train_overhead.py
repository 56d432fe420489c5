"""Lightning's training overhead over a plain PyTorch loop on the same data, model and optimiser.

Prints JSON: median seconds per epoch of each variant over interleaved repeats and their ratios.
Variants: a hand-written loop; the same loop writing a "last" and a "best" checkpoint (model, optimiser
and scheduler state) every epoch, as the app does; Lightning bare (no logger, no checkpoint); Lightning as
the training app configures it (CSV logger, checkpoint callback with save_last, non-finite guard).
Validation is off in all of them, so only the training loop is compared; the like-for-like ratios are
bare/plain and configured/plain-with-checkpoints.

    python scripts/bench_train_overhead.py [--dataset FILE] [--epochs 8] [--repeats 5] [--threads 1]

Each variant reports wall and process CPU seconds per epoch; on a shared machine the CPU-time ratio is
the steadier of the two.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from flexlearn.atomic import atomic_path
from flexlearn.data.datamodule import DirectionDataModule
from flexlearn.data.sources import DataConfig, prepare_dataset
from flexlearn.tasks.callbacks import NonFiniteLossGuard
from flexlearn.tasks.direction import DirectionTask, cosine_loss

MODEL = {"hidden": [128, 128, 128], "activation": "silu"}


def timed(fn) -> tuple[float, float]:
    """(wall s, process CPU s) taken by fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def plain_loop(dm: DirectionDataModule, epochs: int, seed: int, checkpoints: bool = False) -> tuple[float, float]:
    torch.manual_seed(seed)
    task = DirectionTask(model=MODEL, max_epochs=epochs)
    task.net.fit_input_normalization(dm.train_delta_b())
    cfg = task.configure_optimizers()
    opt, sched = cfg["optimizer"], cfg["lr_scheduler"]["scheduler"]
    loader = dm.train_dataloader()
    tmp = tempfile.TemporaryDirectory()

    def run() -> None:
        for epoch in range(epochs):
            loader.sampler.set_epoch(epoch)
            for delta_b, label in loader:
                loss = cosine_loss(task.net(delta_b), label)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            sched.step()
            if checkpoints:
                state = {
                    "epoch": epoch,
                    "state_dict": task.state_dict(),
                    "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(),
                }
                for name in ("last.ckpt", "best.ckpt"):
                    with atomic_path(Path(tmp.name) / name) as part:
                        torch.save(state, part)

    wall, cpu = timed(run)
    tmp.cleanup()
    return wall / epochs, cpu / epochs


def lightning_loop(dm: DirectionDataModule, epochs: int, seed: int, configured: bool) -> tuple[float, float]:
    torch.manual_seed(seed)
    task = DirectionTask(model=MODEL, max_epochs=epochs)
    with tempfile.TemporaryDirectory() as tmp:
        extra = {}
        if configured:
            extra = {
                "logger": CSVLogger(tmp, name="csv", version=""),
                "callbacks": [ModelCheckpoint(dirpath=tmp, save_last=True), NonFiniteLossGuard()],
            }
        else:
            extra = {"logger": False, "enable_checkpointing": False}
        trainer = L.Trainer(
            max_epochs=epochs,
            accelerator="cpu",
            devices=1,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            enable_progress_bar=False,
            enable_model_summary=False,
            deterministic=True,
            default_root_dir=tmp,
            **extra,
        )
        wall, cpu = timed(lambda: trainer.fit(task, datamodule=dm))
        return wall / epochs, cpu / epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=None, help="processed dataset (default: the simulated sweep)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache"))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--batch-size", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = args.dataset or prepare_dataset(DataConfig(), args.cache_dir)
    dm = DirectionDataModule(path, batch_size=args.batch_size)
    dm.setup()
    runs = {
        "plain": lambda r: plain_loop(dm, args.epochs, r),
        "plain_with_checkpoints": lambda r: plain_loop(dm, args.epochs, r, checkpoints=True),
        "lightning_bare": lambda r: lightning_loop(dm, args.epochs, r, configured=False),
        "lightning_configured": lambda r: lightning_loop(dm, args.epochs, r, configured=True),
    }
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(args.repeats):  # interleaved, so that machine load drifts affect all variants alike
        for name, run in runs.items():
            w, c = run(r)
            wall[name].append(w)
            cpu[name].append(c)
    med = {k: statistics.median(v) for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    n_train = len(dm.split("train"))
    print(
        json.dumps(
            {
                "dataset": str(path),
                "n_train": n_train,
                "batch_size": args.batch_size,
                "steps_per_epoch": -(-n_train // args.batch_size),
                "epochs": args.epochs,
                "repeats": args.repeats,
                "torch_threads": torch.get_num_threads(),
                "median_wall_s_per_epoch": med,
                "median_cpu_s_per_epoch": med_cpu,
                "ratio_lightning_bare_over_plain": med["lightning_bare"] / med["plain"],
                "ratio_lightning_configured_over_plain": med["lightning_configured"] / med["plain"],
                "ratio_lightning_configured_over_plain_with_checkpoints": med["lightning_configured"]
                / med["plain_with_checkpoints"],
                "cpu_ratio_lightning_bare_over_plain": med_cpu["lightning_bare"] / med_cpu["plain"],
                "cpu_ratio_lightning_configured_over_plain": med_cpu["lightning_configured"] / med_cpu["plain"],
                "all_wall_s_per_epoch": wall,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
