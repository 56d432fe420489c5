"""One intra-op thread for the arm tests: their tensors are tiny, and on a loaded machine OpenMP
barriers between two threads cost more than the work (10–20× slower steps)."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
