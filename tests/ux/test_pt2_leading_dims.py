"""The .pt2 direction model takes any leading shape (..., 3), as its metadata says, and equals the eager model."""

from __future__ import annotations

import pytest
import torch


def test_program_takes_any_leading_shape(tmp_path):
    from flexlearn.models.direction_mlp import DirectionMLP
    from flexlearn.runtime.export import load_program, program_artifact, write_artifacts

    torch.manual_seed(0)
    model = DirectionMLP(hidden=(8,)).eval()
    path = tmp_path / "m.pt2"
    write_artifacts([program_artifact(model, torch.randn(4, 3), path, {"input": {"shape": "(..., 3)"}})])
    program, meta = load_program(path)
    assert meta["input"]["shape"] == "(..., 3)"
    with torch.inference_mode():
        for shape in [(5, 3), (1, 3), (3,), (2, 4, 3), (2, 1, 2, 3), (0, 3)]:
            x = 1e-5 * torch.randn(*shape)
            y = program(x)
            assert y.shape == model(x).shape == shape
            torch.testing.assert_close(y, model(x), rtol=1e-6, atol=1e-7)
        with pytest.raises(Exception):  # noqa: B017  (torch.export's error type varies by release)
            program(torch.randn(5, 4))  # the feature dimension stays checked
