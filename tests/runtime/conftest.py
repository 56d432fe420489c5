"""Fixtures for the runtime tests: a small direction model fitted on rig pairs, a short robot recording."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def direction_model():
    from flexlearn.replay.shapes import fit_direction_model

    return fit_direction_model(n=3000, steps=500, hidden=(48, 48))


@pytest.fixture(scope="session")
def curl_recording():
    from flexlearn.sim.robot import simulate_robot
    from flexlearn.sim.shape_scenarios import scenario

    return simulate_robot(scenario("3d_curl", period=12.0), 15.0)
