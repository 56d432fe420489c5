"""A rosbag coil field is read strictly: a boolean or 0/1, never "anything truthy is on"."""

from __future__ import annotations

import numpy as np
import pytest

from flexlearn.errors import DataError
from flexlearn.ingest.rosbag import coil_state


@pytest.mark.parametrize("value,expected", [(True, 1.0), (False, 0.0), (1, 1.0), (0, 0.0), (np.uint8(1), 1.0)])
def test_boolean_and_zero_one_are_accepted(value, expected):
    assert coil_state(value, "data") == expected


@pytest.mark.parametrize("value", [2, -1, 0.5, "false", None, float("nan")])
def test_anything_else_names_the_field(value):
    with pytest.raises(DataError, match="coil field 'data'"):
        coil_state(value, "data")
