"""LightningDataModule over a processed direction dataset (one Parquet file, split by pose).

Batches are sliced from in-memory float32 tensors (no per-sample collation), and the shuffle of
every epoch is drawn from a generator seeded by (seed, epoch), so a run resumed from a checkpoint
sees exactly the batches an uninterrupted run would.

`DirectionDataModule.require` refuses a dataset whose splits are too small to train or score on (an
empty file, one row, no train split, a train split only): a `DataError` naming the file and the split.
Fields that are not finite in float32 (e.g. ΔB scaled past 3.4e38 T) are refused when the file is read.

The training batch size follows the dataset unless set (`auto_batch_size`): a few hundred recorded poses get
small batches, so that an epoch is several optimizer steps rather than one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from flexlearn.data.dataset import SPLITS, DirectionDataset
from flexlearn.errors import DataError

# Fewest rows each split needs: two to fit the input standardisation (a std), one to score.
MIN_ROWS = {"train": 2, "val": 1, "test": 1}
MAX_AUTO_BATCH = 512
MIN_AUTO_BATCH = 16
AUTO_STEPS_PER_EPOCH = 16


def auto_batch_size(n_train: int) -> int:
    """Training batch size for ``n_train`` rows: the largest power of two B ≤ n_train / 16 (at least 16
    optimizer steps per epoch), clipped to [16, 512]; 512 for the default 15,000-pose sweep, 16 for 400 poses.

    Args:
        n_train: number of rows of the train split.

    Returns:
        The batch size B.
    """
    b = MIN_AUTO_BATCH
    while b * 2 <= min(MAX_AUTO_BATCH, n_train // AUTO_STEPS_PER_EPOCH):
        b *= 2
    return b


def _as_float32(path: Path, split: str, name: str, value, pose_id) -> torch.Tensor:
    """``value`` (N, 3) as float32; `DataError` naming the row if it or its norm is not finite in float32."""
    t = torch.as_tensor(value, dtype=torch.float32)
    bad = ~torch.isfinite(torch.linalg.vector_norm(t, dim=-1))
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise DataError(
            f"{path}: split '{split}' column '{name}' row {i} (pose_id {int(pose_id[i])}) is not "
            f"finite in float32 (value {list(map(float, value[i]))}); check the units"
        )
    return t


class EpochSeededBatchSampler(Sampler[torch.Tensor]):
    """Yields index batches (B,) of a permutation drawn from ``seed + epoch`` (or in order).

    With ``world_size > 1`` (DDP) the permutation, padded by its head to a multiple of ``world_size``, is
    dealt out ``order[rank::world_size]``, so every rank gets the same number of batches of disjoint data.
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        shuffle: bool,
        seed: int,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.n, self.batch_size, self.shuffle, self.seed, self.drop_last = n, batch_size, shuffle, seed, drop_last
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    @property
    def _n_local(self) -> int:
        return -(-self.n // self.world_size)

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at the start of every epoch.

        Args:
            epoch: the epoch index; the shuffle is drawn from (seed, epoch).
        """
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[torch.Tensor]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
            order = torch.randperm(self.n, generator=g)
        else:
            order = torch.arange(self.n)
        if self.world_size > 1:
            order = torch.cat([order, order[: self._n_local * self.world_size - self.n]])[self.rank :: self.world_size]
        n = order.numel()
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            yield order[start : start + self.batch_size]

    def __len__(self) -> int:
        n = self._n_local
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class TensorBatches(Dataset):
    """Dataset whose items are whole batches: ``ds[idx]`` with an index tensor returns (ΔB, label), or
    (ΔB, label, module) when the rows carry a module index (datasets of several modules)."""

    def __init__(self, delta_b: torch.Tensor, label: torch.Tensor, module: Optional[torch.Tensor] = None) -> None:
        self.delta_b, self.label, self.module = delta_b, label, module

    def __len__(self) -> int:
        return self.delta_b.shape[0]

    def __getitem__(self, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.module is None:
            return self.delta_b[idx], self.label[idx]
        return self.delta_b[idx], self.label[idx], self.module[idx]


class DirectionDataModule(L.LightningDataModule):
    """Train/val/test loaders of (ΔB [T] float32 (B, 3), label unit float32 (B, 3)[, module int64 (B,)])."""

    def __init__(
        self,
        dataset_path: str | Path,
        batch_size: Optional[int] = None,
        seed: int = 0,
        eval_batch_size: int = 8192,
    ) -> None:
        """``batch_size`` None: `auto_batch_size` of the train split, set by `setup`."""
        super().__init__()
        self.dataset_path = Path(dataset_path)
        self.batch_size_option = batch_size
        self.batch_size = batch_size or MAX_AUTO_BATCH  # resolved by setup
        self.eval_batch_size, self.seed = eval_batch_size, seed
        self.dataset: Optional[DirectionDataset] = None
        self._splits: dict[str, TensorBatches] = {}

    def setup(self, stage: Optional[str] = None) -> None:
        """Load the dataset and its split tensors once (later calls do nothing); resolve an automatic batch size.

        Args:
            stage: Lightning's stage name; ignored (every split is loaded).
        """
        if self.dataset is not None:
            return
        dataset = DirectionDataset.load(self.dataset_path)
        splits = {}
        for name in SPLITS:
            part = dataset.subset(name)
            splits[name] = TensorBatches(
                _as_float32(self.dataset_path, name, "delta_b", part.delta_b, part.pose_id),
                _as_float32(self.dataset_path, name, "label", part.label, part.pose_id),
                None if part.module is None else torch.as_tensor(part.module),
            )
        self.dataset, self._splits = dataset, splits
        if self.batch_size_option is None:
            self.batch_size = auto_batch_size(len(splits["train"]))

    def require(self, *names: str) -> None:
        """Raise `DataError` naming the file and split unless every split in ``names`` has `MIN_ROWS` rows.

        Args:
            *names: the splits to check ('train', 'val', 'test').

        Raises:
            DataError: a split has fewer than its `MIN_ROWS` rows.
        """
        self.setup()
        counts = {n: len(self._splits[n]) for n in SPLITS}
        for name in names:
            if counts[name] < MIN_ROWS[name]:
                rows = ", ".join(f"{n} {c}" for n, c in counts.items())
                raise DataError(
                    f"{self.dataset_path}: split '{name}' has {counts[name]} row(s), needs at least "
                    f"{MIN_ROWS[name]} (rows per split: {rows}); record or keep more poses"
                )

    @property
    def n_modules(self) -> int:
        """Number of modules of a dataset with a ``module`` column (1 + the largest index); 0 without one."""
        self.setup()
        assert self.dataset is not None
        module = self.dataset.module
        return 0 if module is None or not len(module) else int(module.max()) + 1

    def split(self, name: str) -> TensorBatches:
        """The tensors of one split ('train', 'val' or 'test').

        Args:
            name: the split.

        Returns:
            The split's `TensorBatches`.
        """
        self.setup()
        return self._splits[name]

    def train_delta_b(self) -> torch.Tensor:
        """Training fields (N, 3) [T], used to fit the model's input normalisation."""
        return self.split("train").delta_b

    def _loader(self, name: str, batch_size: int, shuffle: bool, rank: int = 0, world_size: int = 1) -> DataLoader:
        data = self.split(name)
        sampler = EpochSeededBatchSampler(
            len(data), batch_size, shuffle=shuffle, seed=self.seed, rank=rank, world_size=world_size
        )
        return DataLoader(data, sampler=sampler, batch_size=None, num_workers=0)

    def train_dataloader(self) -> DataLoader:
        """Training batches; under DDP this rank's shard (the trainer runs with use_distributed_sampler=False).
        Validation and test sets are evaluated whole on every rank, so their metrics are exact."""
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        return self._loader("train", self.batch_size, shuffle=True, rank=rank, world_size=world)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, shuffle=False)
