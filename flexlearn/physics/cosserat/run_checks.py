"""What a Cosserat run checks before it starts, and how a failed run is explained.

The time step, the duration and the rod's parameters (:func:`check_time_and_rod`); the
:class:`~flexlearn.physics.cosserat.errors.IntegrationError` of a kernel failure (:func:`kernel_error`, raised as it
is with ``backend='numba'``); what makes a state unphysical (:func:`unphysical`); the loads and the remedies a failed
step names (:func:`load_names`, :func:`implicit_remedy`).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.simulation import SimulatedRod

PARAMETERS = (
    "length",
    "density",
    "youngs_modulus",
    "shear_modulus",
    "area",
    "second_moment_1",
    "second_moment_2",
    "torsion_constant",
)
"""The rod buffers that must be finite and > 0 before a run starts."""


def load_names(loads: Sequence[object]) -> str:
    """The loads of a run, named (their ``repr`` where it says more than the class).

    Args:
        loads: the run's loads.

    Returns:
        Their names joined by ", ", or "none".
    """
    names = [repr(ld) if type(ld).__repr__ is not object.__repr__ else type(ld).__name__ for ld in loads]
    return ", ".join(names) if names else "none"


def implicit_remedy(dt: float, beta: float, zeta: float, loads: Sequence[object]) -> str:
    """What to change when an implicit step fails: the step's β and ζ, the loads, and the remedies in the order
    they were measured to help (docs/cosserat.md, 'Step loads').

    Args:
        dt: the time step [s].
        beta: the implicit step's β.
        zeta: its numerical dissipation ζ.
        loads: the run's loads.

    Returns:
        The sentence the error ends with.
    """
    return (
        f"the implicit step (dt = {dt:g} s, implicit_beta = {beta:g}, implicit_dissipation = "
        f"{zeta:g}) lost stability under the loads {load_names(loads)}: the stiffness the implicit "
        "filter leaves explicit (geometric stiffness of large rotations, magnets) grew the unresolved modes; "
        "remedy: implicit_beta=0.3 (tolerates explicit stiffness up to 4β − 1 of the implicit one) with "
        "implicit_dissipation=0.05 (settles the modes the step does not resolve), or ramp the load over a few "
        "1/ω₁, or reduce dt"
    )


def kernel_error(failure: lgvi.KernelFailure, dt: float) -> IntegrationError:
    """The IntegrationError of a failed kernel run (``backend='numba'``): the step, rod and node, without the
    state before the step (the tensor path, ``backend='torch'``, reruns the simulation for it).

    Args:
        failure: where the kernel stopped.
        dt: the time step [s].

    Returns:
        The error to raise.
    """
    k = failure.failed_step()
    what = {lgvi.BAD_ELEMENT: "element", lgvi.BAD_NODE: "node", lgvi.NEWTON: "node"}[failure.status]
    cause = {
        lgvi.BAD_ELEMENT: "strain beyond the limit or an element bent through",
        lgvi.BAD_NODE: "a non-finite force or torque",
        lgvi.NEWTON: "the Cayley–Newton solve did not converge",
    }[failure.status]
    return IntegrationError(
        f"integration failed at step {k} (t = {k * dt:.6g} s), rod {failure.rod}, {what} {failure.where} "
        f"(fused kernel): {cause}; backend='torch' reruns it with the state before the step and the remedies",
        step=k,
        node=failure.where,
        rod=failure.rod,
        what=what,
    )


def check_time_and_rod(rod: SimulatedRod, duration: float, dt: float) -> None:
    """Check the time step, the duration and the rod's parameters before a run.

    Args:
        rod: the rod model.
        duration: simulated time [s], finite and ≥ 0.
        dt: time step [s], finite and > 0.

    Raises:
        ConfigError: naming ``dt`` or ``duration``.
        IntegrationError: naming a non-physical rod parameter (and its batch index).
    """
    check(isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0, "dt", dt, "must be a finite number > 0 [s]")
    check(math.isfinite(duration) and duration >= 0, "duration", duration, "must be finite and >= 0 [s]")
    for name in PARAMETERS:
        v = getattr(rod, name).detach()
        bad = ~(torch.isfinite(v) & (v > 0))
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            raise IntegrationError(
                f"non-physical parameter {name}[{i}] = {v.reshape(-1)[i].item()!r} before step 0: "
                "must be finite and > 0",
                step=0,
                node=-1,
                rod=i,
                what="parameter",
            )


def unphysical(f: Tensor, tau: Tensor, strain: Tensor, tr: Tensor, limit: float) -> Optional[Tuple[int, int, str]]:
    """The first element whose strain is beyond ``limit`` (or not finite) or that is bent through, else the first
    node with a non-finite force or torque, of a state.

    Args:
        f: Node forces [N], shape (B, n, 3).
        tau: Node torques [N m], shape (B, n, 3).
        strain: Element strains |Γ|, shape (B, N).
        tr: Traces of the elements' relative rotations, shape (B, N) (−1: bent through 180°).
        limit: The strain limit.

    Returns:
        ``(rod, node, what)`` (the element's second node), or None for a physical state.
    """
    bad_el = ~torch.isfinite(strain) | (strain > limit) | ~(1.0 + tr > 1e-6)
    if bool(bad_el.any()):
        b, i = [int(x) for x in bad_el.nonzero()[0]]
        what = (
            f"element {i} (nodes {i}-{i + 1}) strain |Γ| = {float(strain[b, i]):.3g} "
            f"(limit {limit}), relative rotation trace {float(tr[b, i]):.3g}"
        )
        return b, i + 1, what
    bad_node = ~torch.isfinite(f).all(-1) | ~torch.isfinite(tau).all(-1)
    if bool(bad_node.any()):
        b, node = [int(x) for x in bad_node.nonzero()[0]]
        return b, node, f"non-finite force or torque at node {node}"
    return None
