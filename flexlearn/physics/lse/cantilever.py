"""Single-rod helper: a cantilever clamped at the identity, lying along +z at rest (LSE, seed 003)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from flexlearn.physics.lse.errors import StaticsInputError
from flexlearn.physics.lse.model import CPRModel, RobotLayout, RodMaterial
from flexlearn.physics.lse.state import Equilibrium, Loads

__all__ = ["cantilever_model", "cantilever_solve", "cantilever_tip_pose"]


def cantilever_model(
    length: float, radius: float, youngs_modulus, shear_modulus, n_elements: int, precurvature=(0.0, 0.0, 0.0)
) -> CPRModel:
    """A `CPRModel` with one rod of circular section clamped at the identity, tip free (platform = tip).

    length [m], radius [m], moduli [Pa] (floats or tensors, e.g. with requires_grad), n_elements ≥ 1.
    Raises StaticsInputError (a ValueError) for a non-positive size or modulus.

    Args:
        length: Rod length [m].
        radius: Radius of the circular section [m].
        youngs_modulus: Young's modulus [Pa] (float or tensor).
        shear_modulus: Shear modulus [Pa] (float or tensor).
        n_elements: Number of LSE elements (≥ 1).
        precurvature: Reference curvature κ₀ (3,) [rad/m] in the body frame.

    Returns:
        The one-rod `CPRModel` (no motors, no gravity on the rod).

    Raises:
        StaticsInputError: A non-positive or non-finite length or radius, or a non-positive modulus.
    """
    if not (length > 0 and radius > 0 and math.isfinite(length) and math.isfinite(radius)):
        raise StaticsInputError(f"length and radius must be positive, got {length}, {radius}")
    e = torch.as_tensor(youngs_modulus, dtype=torch.float64)
    g = torch.as_tensor(shear_modulus, dtype=torch.float64)
    if bool((e.detach() <= 0).any()) or bool((g.detach() <= 0).any()):
        raise StaticsInputError(f"moduli must be positive, got E={youngs_modulus}, G={shear_modulus}")
    area = math.pi * radius**2
    i = math.pi * radius**4 / 4
    eye = torch.eye(4, dtype=torch.float64)
    xi0 = torch.tensor(list(precurvature) + [0.0, 0.0, 1.0], dtype=torch.float64)
    layout = RobotLayout(
        motor_axis=torch.zeros(0, 3),
        motor_pivot=torch.zeros(0, 3),
        rod_motor=torch.tensor([-1]),
        base_pose0=eye[None],
        tip_local=eye[None],
        lengths=torch.tensor([float(length)], dtype=torch.float64),
    )
    material = RodMaterial(
        youngs_modulus=1.0, shear_modulus=1.0, area=area, i1=i, i2=i, torsion=2 * i, density=0.0, xi0=xi0
    )
    model = CPRModel(layout, material, n_elements, torch.zeros(3))
    # keep autograd links to the caller's moduli
    model.youngs_modulus = e.reshape(1) * torch.ones(1, dtype=torch.float64)
    model.shear_modulus = g.reshape(1) * torch.ones(1, dtype=torch.float64)
    return model


def cantilever_solve(
    model: CPRModel, tip_force=None, tip_moment=None, init: Equilibrium | None = None, **kw
) -> Equilibrium:
    """Equilibrium of a `cantilever_model` under dead world-frame tip loads (3,) [N], (3,) [N·m].

    Args:
        model: A model made by :func:`cantilever_model`.
        tip_force: World tip force (3,) [N]; None = 0.
        tip_moment: World tip moment (3,) [N·m]; None = 0.
        init: Equilibrium to start Newton from; None = the straight rod.
        **kw: Further keyword arguments of `CPRModel.solve`.

    Returns:
        The equilibrium (gravity off).
    """
    dt = torch.float64
    f = torch.zeros(3, dtype=dt) if tip_force is None else torch.as_tensor(tip_force, dtype=dt)
    m = torch.zeros(3, dtype=dt) if tip_moment is None else torch.as_tensor(tip_moment, dtype=dt)
    loads = Loads(ee_wrench=torch.cat([m, f]), gravity=False)
    return model.solve(torch.zeros(0, dtype=dt), loads, init=init, **kw)


def cantilever_tip_pose(
    length: float,
    radius: float,
    youngs_modulus,
    shear_modulus,
    n_elements: int,
    tip_force=None,
    tip_moment=None,
    **solver_kw,
) -> Tensor:
    """(4, 4) tip pose of a rod clamped at the identity, lying along +z at rest, under dead tip loads.

    length, radius [m]; youngs_modulus, shear_modulus [Pa]; tip_force (3,) [N] and tip_moment (3,) [N·m]
    in the world frame (None = 0). float64, SI. Gradients flow to tensor inputs (implicit differentiation).
    Raises `ConvergenceError` if Newton fails from the straight configuration.

    Args:
        length: Rod length [m].
        radius: Radius of the circular section [m].
        youngs_modulus: Young's modulus [Pa] (float or tensor).
        shear_modulus: Shear modulus [Pa] (float or tensor).
        n_elements: Number of LSE elements (≥ 1).
        tip_force: World tip force (3,) [N]; None = 0.
        tip_moment: World tip moment (3,) [N·m]; None = 0.
        **solver_kw: Further keyword arguments of `CPRModel.solve`.

    Returns:
        The tip pose (4, 4), float64.
    """
    model = cantilever_model(length, radius, youngs_modulus, shear_modulus, n_elements)
    return cantilever_solve(model, tip_force, tip_moment, **solver_kw).g_ee
