"""One intra-op thread for the arm tests: their tensors are tiny, and on a loaded machine OpenMP
barriers between two threads cost more than the work (10–20× slower steps)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
