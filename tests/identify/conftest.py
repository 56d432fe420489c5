"""One intra-op thread for the identification tests: their tensors are small, and on a loaded machine
two threads per process slow the LSE and Cosserat solves many-fold."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
