"""The planar two-link flexible manipulator of seed 000: the plant (assumed modes, Lagrangian by autodiff,
implicit-midpoint integration; :mod:`.lagrangian`, its tip and IMU outputs :mod:`.outputs`), its natural
frequencies (:mod:`.analysis`), its configuration (:mod:`.config`) and its flexibility-aware kinematics on SE(2)
(§IV; :mod:`.kinematics_se2`). The closed-loop simulation with IMU frames is in
:mod:`flexlearn.sim.arm_closed_loop`, the finite-element truth simulator in :mod:`flexlearn.sim.flexible_arm`."""

from flexlearn.physics.arm.analysis import linearized_frequencies
from flexlearn.physics.arm.config import ArmConfig, ArmLinkConfig, seed_arm_config
from flexlearn.physics.arm.lagrangian import G0, FlexibleArmPlant, assumed_mode_link

__all__ = [
    "ArmConfig",
    "ArmLinkConfig",
    "FlexibleArmPlant",
    "seed_arm_config",
    "assumed_mode_link",
    "linearized_frequencies",
    "G0",
]
