"""The rod tests build tensors with the default dtype: run each in float64 and restore the default after."""

import pytest
import torch


@pytest.fixture(autouse=True)
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
