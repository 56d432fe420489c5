"""Hydra entry points: thin wrappers around flexlearn.tasks / flexlearn.data / flexlearn.sim."""

import os

# Idle OpenMP threads sleep instead of spinning: on a loaded 2-core machine spinning torch threads
# slowed the simulation 10x. Must be set before torch is first imported; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
