"""The epoch-seeded batch sampler: reproducible per epoch, and under DDP disjoint equal-length shards."""

import torch

from flexlearn.data.datamodule import EpochSeededBatchSampler


def _indices(sampler) -> torch.Tensor:
    return torch.cat(list(sampler)) if len(sampler) else torch.empty(0, dtype=torch.long)


def test_single_process_permutation_is_seeded_by_epoch():
    s = EpochSeededBatchSampler(23, 5, shuffle=True, seed=3)
    first = _indices(s)
    assert sorted(first.tolist()) == list(range(23)) and len(list(s)) == len(s) == 5
    assert torch.equal(first, _indices(s))
    s.set_epoch(1)
    assert not torch.equal(first, _indices(s))


def test_ddp_shards_cover_the_epoch_with_equal_batch_counts():
    for n, world in ((23, 2), (24, 3), (7, 4)):
        shards = [EpochSeededBatchSampler(n, 4, shuffle=True, seed=0, rank=r, world_size=world) for r in range(world)]
        lengths = {len(s) for s in shards}
        assert len(lengths) == 1 and lengths == {len(list(shards[0]))}  # equal step counts: no DDP hang
        parts = [_indices(s) for s in shards]
        union = torch.cat(parts)
        assert set(union.tolist()) == set(range(n))  # every sample seen
        assert union.numel() - n < world  # padding only to a multiple of world
        whole = _indices(EpochSeededBatchSampler(n, 4, shuffle=True, seed=0))
        assert torch.equal(parts[0], torch.cat([whole, whole])[: union.numel()][0::world])
