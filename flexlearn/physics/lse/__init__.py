"""LSE statics of continuum parallel robots (seed 003): linear strain elements on SE(3) nodes, 4th-order Magnus map,
kinematic embeddings, Riemannian Newton; implicit gradients, inverse statics, identification; a Cosserat shooting
baseline; the stability of every equilibrium (:class:`Stability`) and load continuation that follows the stable
branch through bifurcations (:mod:`flexlearn.physics.lse.continuation`). See :mod:`flexlearn.physics.lse.element`
for the element and the notes on the seed, :mod:`flexlearn.physics.lse.model` for the robot and the solver.
"""

from flexlearn.physics.lse.cantilever import cantilever_model, cantilever_solve, cantilever_tip_pose
from flexlearn.physics.lse.config import CPRConfig, GeometryConfig, PulleyConfig, RodConfig
from flexlearn.physics.lse.continuation import ContinuationOptions, ContinuationResult, follow_stable
from flexlearn.physics.lse.element import (
    element_energy,
    element_forces,
    element_tangent,
    magnus_omega,
    mean_strain,
    section_properties,
    section_stiffness,
    strain_jacobians,
)
from flexlearn.physics.lse.errors import ConvergenceError
from flexlearn.physics.lse.inverse import (
    InverseStaticsResult,
    actuation_path,
    identify_youngs_modulus,
    inverse_statics,
    solve_path,
)
from flexlearn.physics.lse.model import CPRModel, RobotLayout, RodMaterial
from flexlearn.physics.lse.newton_policy import NewtonSettings
from flexlearn.physics.lse.state import Equilibrium, Loads, Stability, motor_twist

__all__ = [
    "CPRConfig",
    "GeometryConfig",
    "PulleyConfig",
    "RodConfig",
    "CPRModel",
    "ConvergenceError",
    "Equilibrium",
    "Stability",
    "ContinuationOptions",
    "ContinuationResult",
    "follow_stable",
    "Loads",
    "NewtonSettings",
    "RobotLayout",
    "RodMaterial",
    "motor_twist",
    "cantilever_model",
    "cantilever_solve",
    "cantilever_tip_pose",
    "element_energy",
    "element_forces",
    "element_tangent",
    "magnus_omega",
    "mean_strain",
    "section_properties",
    "section_stiffness",
    "strain_jacobians",
    "InverseStaticsResult",
    "actuation_path",
    "identify_youngs_modulus",
    "inverse_statics",
    "solve_path",
]
