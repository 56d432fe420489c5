"""Defaults that follow the dataset: batch size by the train split, epochs by a step budget (capped by
trainer.max_epochs), a plateau stop, and a warning when a run makes too few optimizer steps."""

from __future__ import annotations

import logging

import pytest

from flexlearn.data.datamodule import auto_batch_size
from flexlearn.tasks.callbacks import TrainingSchedule


@pytest.mark.parametrize(("n_train", "batch"), [(2, 16), (311, 16), (520, 32), (3000, 128), (12000, 512), (1e6, 512)])
def test_auto_batch_size_gives_at_least_16_steps_per_epoch(n_train, batch):
    b = auto_batch_size(int(n_train))
    assert b == batch
    assert n_train < 16 * 16 or n_train // b >= 16


def test_a_small_recording_gets_small_batches_and_a_warning_when_capped_short(compose_cfg, caplog):
    from flexlearn.jobs.train import train

    cfg = compose_cfg("train", ["data.sim.n_poses=400", "trainer.max_epochs=2", "test=false"])
    with caplog.at_level(logging.INFO, logger="flexlearn.tasks.callbacks"):
        train(cfg)
    text = caplog.text
    # ~300 training rows → batch 16, 19 steps per epoch; the 4000-step plan would need 211 epochs, capped at 2.
    assert "schedule: 2 epochs of 19 optimizer steps (batch 16" in text
    assert "this run made only 38 optimizer steps" in text and "trainer.max_epochs=211" in text


class _Metrics:
    """The parts of a trainer the plateau stop reads."""

    def __init__(self) -> None:
        self.callback_metrics: dict[str, float] = {}
        self.sanity_checking = False
        self.should_stop = False
        self.is_global_zero = True
        self.current_epoch = 0


def test_the_plateau_stop_waits_for_its_patience():
    import torch

    cb = TrainingSchedule(min_patience=3, patience_fraction=0.0)
    cb.patience = 3
    trainer = _Metrics()
    for epoch, value in enumerate([1.0, 0.9, 0.899, 0.9, 0.95]):
        trainer.current_epoch = epoch
        trainer.callback_metrics["val/ang_err_median_deg"] = torch.tensor(value)
        cb.on_validation_end(trainer, None)  # type: ignore[arg-type]
        assert trainer.should_stop == (epoch == 4)  # 0.899 is no progress of 0.5 % over 0.9
    state = cb.state_dict()
    fresh = TrainingSchedule()
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
