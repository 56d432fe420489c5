"""One intra-op thread for the identification tests: their tensors are small, and on a loaded machine
two threads per process slow the LSE and Cosserat solves many-fold."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
