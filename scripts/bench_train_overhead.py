"""Lightning's training overhead over a plain PyTorch loop on the same data, model and optimiser.

Prints JSON: median seconds per epoch of each variant over interleaved repeats and their ratios.
Variants: a hand-written loop; Lightning bare (no logger, no checkpoint); Lightning as the training
app configures it (CSV logger, checkpoint callback with save_last, non-finite guard). Validation is
off in all three, so only the training loop is compared.

    python scripts/bench_train_overhead.py [--dataset FILE] [--epochs 5] [--repeats 3]
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

from flexlearn.data.datamodule import DirectionDataModule
from flexlearn.data.sources import DataConfig, prepare_dataset
from flexlearn.tasks.callbacks import NonFiniteLossGuard
from flexlearn.tasks.direction import DirectionTask, cosine_loss

MODEL = {"hidden": [128, 128, 128], "activation": "silu"}


def plain_loop(dm: DirectionDataModule, epochs: int, seed: int) -> float:
    torch.manual_seed(seed)
    task = DirectionTask(model=MODEL, max_epochs=epochs)
    task.net.fit_input_normalization(dm.train_delta_b())
    cfg = task.configure_optimizers()
    opt, sched = cfg["optimizer"], cfg["lr_scheduler"]["scheduler"]
    loader = dm.train_dataloader()
    start = time.perf_counter()
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for delta_b, label in loader:
            loss = cosine_loss(task.net(delta_b), label)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
    return (time.perf_counter() - start) / epochs


def lightning_loop(dm: DirectionDataModule, epochs: int, seed: int, configured: bool) -> float:
    torch.manual_seed(seed)
    task = DirectionTask(model=MODEL, max_epochs=epochs)
    with tempfile.TemporaryDirectory() as tmp:
        extra = {}
        if configured:
            extra = {"logger": CSVLogger(tmp, name="csv", version=""),
                     "callbacks": [ModelCheckpoint(dirpath=tmp, save_last=True), NonFiniteLossGuard()]}
        else:
            extra = {"logger": False, "enable_checkpointing": False}
        trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, limit_val_batches=0,
                            num_sanity_val_steps=0, enable_progress_bar=False, enable_model_summary=False,
                            deterministic=True, default_root_dir=tmp, **extra)
        start = time.perf_counter()
        trainer.fit(task, datamodule=dm)
        return (time.perf_counter() - start) / epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=None, help="processed dataset (default: the simulated sweep)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512)
    args = parser.parse_args()
    path = args.dataset or prepare_dataset(DataConfig(), args.cache_dir)
    dm = DirectionDataModule(path, batch_size=args.batch_size)
    dm.setup()
    times: dict[str, list[float]] = {"plain": [], "lightning_bare": [], "lightning_configured": []}
    for r in range(args.repeats):  # interleaved, so that machine load drifts affect all variants alike
        times["plain"].append(plain_loop(dm, args.epochs, r))
        times["lightning_bare"].append(lightning_loop(dm, args.epochs, r, configured=False))
        times["lightning_configured"].append(lightning_loop(dm, args.epochs, r, configured=True))
    med = {k: statistics.median(v) for k, v in times.items()}
    n_train = len(dm.split("train"))
    print(json.dumps({
        "dataset": str(path), "n_train": n_train, "batch_size": args.batch_size,
        "steps_per_epoch": -(-n_train // args.batch_size), "epochs": args.epochs, "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "median_s_per_epoch": med,
        "ratio_lightning_bare_over_plain": med["lightning_bare"] / med["plain"],
        "ratio_lightning_configured_over_plain": med["lightning_configured"] / med["plain"],
        "all_s_per_epoch": times,
    }, indent=2))


if __name__ == "__main__":
    main()
