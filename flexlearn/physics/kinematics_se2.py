"""Deprecated location: the flexible-arm kinematics moved to :mod:`flexlearn.physics.arm.kinematics_se2`."""

import warnings

from flexlearn.physics.arm.kinematics_se2 import *  # noqa: F401,F403
from flexlearn.physics.arm.kinematics_se2 import __all__  # noqa: F401

warnings.warn(
    "flexlearn.physics.kinematics_se2 moved to flexlearn.physics.arm.kinematics_se2", DeprecationWarning, stacklevel=2
)
