"""Glue between `CPRModel` and the compiled Newton solver: constant arrays, loads and the warm-started solve.

The robot's constant arrays (base poses at θ = 0, motor twists, attachment projections, element lengths,
section stiffness, reference strains, residual weights, lumped unit gravity) are converted to numpy by
:func:`build_constants`, once per change of a buffer (kept in the model's
:class:`~flexlearn.physics.lse.backend.SolverCache`), so that a warm-started solve costs one predictor call and
one compiled Newton call (:mod:`flexlearn.physics.lse.compiled.newton`) plus the construction of the result.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from flexlearn.physics.lse.compiled.newton import base_poses, newton_iterations, predict_state
from flexlearn.physics.lse.newton_policy import NewtonSettings
from flexlearn.physics.lse.state import Loads, motor_twist

__all__ = ["CompiledConstants", "build_constants", "load_scale_compiled", "newton_compiled", "predict_compiled"]


class CompiledConstants(NamedTuple):
    """float64 numpy views of a model's constant data (shapes: R rods, N elements, M motors)."""

    base0: np.ndarray  # (R, 4, 4) base poses at θ = 0
    s_world: np.ndarray  # (R, 6) twist of each rod's motor (zeros for fixed rods)
    rod_motor: np.ndarray  # (R,) int64, −1: fixed
    n_motors: int
    tip_local: np.ndarray  # (R, 4, 4)
    adinv: np.ndarray  # (R, 6, 6) Ad_{(g^loc)⁻¹}
    h: np.ndarray  # (R,) element length [m]
    kd: np.ndarray  # (R, 6) section stiffness diagonal
    xi0: np.ndarray  # (R, 6) reference strain
    w: np.ndarray  # (12N,) residual weights
    gravity_nodes: np.ndarray  # (R, N+1, 6) lumped rod weight per unit gravity scale (world [m; f])
    gravity_ee: np.ndarray  # (6,) platform weight per unit gravity scale
    stiffness_scale: float  # max EI/L [N·m] (the residual scale without applied loads)
    mean_length: float  # [m]


def _np(t: Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).contiguous().numpy()


def build_constants(model) -> CompiledConstants:
    """The model's :class:`CompiledConstants` (cached by :meth:`SolverCache.constants
    <flexlearn.physics.lse.backend.SolverCache.constants>` until a buffer changes).

    Args:
        model: The `CPRModel`.

    Returns:
        The constant arrays, float64.
    """
    n = model.n_elements
    m = model.motor_axis.shape[0]
    r = model.n_rods
    if m > 0:
        s_world = _np(motor_twist(model.motor_axis, model.motor_pivot)[model.rod_motor.clamp_min(0)])
        s_world[model.rod_motor.numpy() < 0] = 0.0
    else:
        s_world = np.zeros((r, 6))
    with torch.no_grad():
        grav = model.node_loads(model.base_pose0.new_zeros(r, n + 1, 4, 4), Loads(gravity=True))
        grav_ee = model.platform_load(model.base_pose0[0], Loads(gravity=True))
    c = CompiledConstants(
        base0=_np(model.base_pose0),
        s_world=np.ascontiguousarray(s_world),
        rod_motor=model.rod_motor.numpy().astype(np.int64),
        n_motors=int(m),
        tip_local=_np(model.tip_local),
        adinv=_np(model.proj_nodes[:, n, :, 12 * n - 6 :]),
        h=_np(model.lengths / n),
        kd=_np(model.stiffness()),
        xi0=_np(model.xi0),
        w=_np(model.residual_weights()),
        gravity_nodes=_np(grav),
        gravity_ee=_np(grav_ee),
        stiffness_scale=float((model.stiffness()[:, :3].max(-1).values / model.lengths).max()),
        mean_length=float(model.lengths.mean()),
    )
    return c


def _load_arrays(c: CompiledConstants, loads: Loads):
    """World nodal loads (R, N+1, 6), platform wrench (6,), pulley (position (3,), tension, present)."""
    gs = float(loads.gravity_scale) if loads.gravity else 0.0
    wn = gs * c.gravity_nodes
    if loads.node_wrenches is not None:
        wn = wn + _np(loads.node_wrenches)
    we = gs * c.gravity_ee
    if loads.ee_wrench is not None:
        we = we + _np(loads.ee_wrench)
    position, pull = loads.pulley_position, loads.pulley_tension
    if position is not None and pull is not None:
        pul_pos, tension, has_pul = _np(position), float(pull), True
    else:
        pul_pos, tension, has_pul = np.zeros(3), 0.0, False
    return np.ascontiguousarray(wn), np.ascontiguousarray(we), pul_pos, tension, has_pul


def load_scale_compiled(c: CompiledConstants, loads: Loads) -> float:
    """:meth:`CPRModel._load_scale` from the constants.

    Args:
        c: The model's constants.
        loads: The applied loads.

    Returns:
        The residual scale [N·m]: max(max EI/L, load magnitude).
    """
    return max(c.stiffness_scale, loads.magnitude(c.mean_length))


def newton_compiled(
    model, c: CompiledConstants, th: Tensor, loads: Loads, state, settings: NewtonSettings, scale: float, log: list
):
    """:meth:`CPRModel._newton` compiled (no gradients, nodal retraction).

    Args:
        model: The `CPRModel`; supplies the step-control knobs ``growth`` and ``backtracks``.
        c: Its :class:`CompiledConstants`.
        th: Motor angles (M,) [rad].
        loads: The applied loads.
        state: Starting state (g_ee (4, 4), g_int (R, N-1, 4, 4), beta (R, N, 6)).
        settings: Stopping and step rules (``tol``, ``max_iter``, ``max_rotation_step``, ``step_tol``).
        scale: Residual scale [N·m] of the scaled residual norm.
        log: Receives the scaled residual norms of this run.

    Returns:
        (converged, state, iterations, None, sensitivity (dy/dθ, dz/dθ) or None, all nodes (R, N+1, 4, 4) of the
        final state); the tensors share memory with numpy arrays.
    """
    g_ee, g_int, beta = state
    wn, we, pul_pos, tension, has_pul = _load_arrays(c, loads)
    base = base_poses(c.base0, c.s_world, c.rod_motor, _np(th))
    buf = np.zeros(settings.max_iter + 2)
    ok, ge, gi, be, nodes, it, nlog, sy, sz, has_sens = newton_iterations(
        base,
        _np(g_ee),
        _np(g_int),
        _np(beta),
        c.tip_local,
        c.adinv,
        c.h,
        c.kd,
        c.xi0,
        wn,
        we,
        pul_pos,
        tension,
        has_pul,
        c.s_world,
        c.rod_motor,
        c.n_motors,
        c.w,
        float(scale),
        float(settings.tol),
        int(settings.max_iter),
        float(settings.max_rotation_step),
        float(settings.step_tol),
        float(model.growth),
        int(model.backtracks),
        buf,
    )
    log.extend(buf[:nlog].tolist())
    sens = (torch.from_numpy(sy), torch.from_numpy(sz)) if has_sens else None
    new_state = (torch.from_numpy(ge), torch.from_numpy(gi), torch.from_numpy(be))
    return bool(ok), new_state, int(it), None, sens, torch.from_numpy(nodes)


def predict_compiled(state, sens, dth: Tensor, max_rot: float):
    """:meth:`CPRModel._predict` compiled: ``q ⊕ (dq/dθ) Δθ``, or the state when a node would turn > max_rot.

    Args:
        state: ``(g_ee (4, 4), g_int (R, N-1, 4, 4), beta (R, N, 6))``.
        sens: ``(dy/dθ (R, 12N - 6, M), dz/dθ (6, M))``.
        dth: Motor angle change Δθ (M,) [rad].
        max_rot: Rotation cap [rad].

    Returns:
        The predicted ``(g_ee, g_int, beta)`` as tensors.
    """
    ge, gi, be = predict_state(
        _np(state[0]), _np(state[1]), _np(state[2]), _np(sens[0]), _np(sens[1]), _np(dth), float(max_rot)
    )
    return torch.from_numpy(ge), torch.from_numpy(gi), torch.from_numpy(be)
