"""Buffer layout of the lean flexible-arm controller step (`flexlearn.runtime.arm.controller.ArmController`).

Built once, at construction: the folded matrices of `flexlearn.runtime.arm.step` (``A``, ``a0``, ``Q``, ``KK``,
``W``, ``init_off``, ``init_map``), the sensor ranges (6,) [m/s², rad/s], the row offsets of the step's vectors and
the float64 buffers the step reads and writes through fixed views (no slicing, few allocations per step). With S IMUs,
n = 2 joints and M modes in all:

    L = a₀ + A [x; z]       [f (2S) | u₁ (S+n) | u₂ (S+n) | z_lin (4S) | y₀ + P z_lin (n_y) | fl (6S)]
    Y                       [angle, θ (n), η (M), w(L), w′(L), w″(0) (n each) | θ̇ (n) | e (6S) | sin arguments]
    work = [x (6S) | z (4S) | Y (n_y) | F (12)],   sines = [cos φ, sin φ (2n) | load slope trig (6S)]

The estimator's filter state ``z = [ψ̂, b̂, α, ω_prev]`` and link-angle trig become views of ``work`` and
``sines``, so the step's products update them in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
from torch import Tensor

from flexlearn.physics.modal.estimator import FlexibleArmEstimator
from flexlearn.runtime.arm.load import LinkLoadModel
from flexlearn.runtime.arm.step import lean_step_maps

__all__ = ["StepLayout", "lean_step_layout"]


@dataclass
class StepLayout:
    """The lean step's row offsets (``k_u``, ``k_u2``, ``k_z``, ``k_lin``, ``k_e``, ``k_sin``, ``n_y``, ``k_fl``)
    and its buffers by name, in the order the controller registers them."""

    offsets: Dict[str, int]
    buffers: Dict[str, Tensor]


def _offsets(S: int, M: int, n: int = 2) -> Dict[str, int]:
    """Row offsets in L (``k_u`` … ``k_z``, ``k_fl``) and in Y (``k_lin``, ``k_e``, ``k_sin``), Y's length ``n_y``."""
    o = {"k_u": 2 * S, "k_u2": 3 * S + n, "k_z": 4 * S + 2 * n, "k_lin": 1 + 4 * n + M}
    o["k_e"] = o["k_lin"] + n
    o["k_sin"] = o["k_e"] + 6 * S
    o["n_y"] = o["k_sin"] + 2 * n + 6 * S
    o["k_fl"] = o["k_z"] + 4 * S + o["n_y"]
    return o


def lean_step_layout(
    estimator: FlexibleArmEstimator, loads: LinkLoadModel, trig_off: Tensor, trig_map: Tensor
) -> StepLayout:
    """Matrices, row offsets and buffers of the lean step; the estimator's filter state and link-angle trig
    become views of the buffers ``work`` and ``sines`` (the estimator is changed in place).

    Args:
        estimator: the controller's IMU estimator (S IMUs, M modes in all).
        loads: the hub-load model of the controller.
        trig_off: offsets of the local IMU slopes (`LinkLoadModel.trig_of_slopes`).
        trig_map: their map from ψ̂ (`LinkLoadModel.trig_of_slopes`).

    Returns:
        The offsets and the buffers (float64; ``out_index`` int64).
    """
    f64 = torch.float64
    n = 2
    S, M = int(estimator.n_imus), int(estimator.n_modes_total)
    # the lean step's matrices (`arm.step`): estimator, loads and outputs folded per linear stretch
    buffers = dict(lean_step_maps(estimator, trig_off, trig_map, loads.coup, loads.mom_n, loads.force, loads.link_sum))
    buffers["ranges"] = torch.tensor([estimator.acc_range] * 3 + [estimator.gyr_range] * 3, dtype=f64)
    o = _offsets(S, M, n)
    n_y = o["n_y"]
    # work = [x (6S) | z (4S) | Y | F (12)]: the estimator's filter state becomes a view of it (`arm.step`
    # ); F holds the step's Python-float outputs, exactly, beside Y, so that one index_select gathers
    # the output [τ | state] from [Y | F] (`out_index`)
    work = torch.zeros(10 * S + n_y + 12, dtype=f64)
    work[6 * S : 10 * S] = estimator.filter_state
    buffers["work"] = work
    estimator.filter_state = work[6 * S : 10 * S]
    for i, name in enumerate(("psi_hat", "bias_hat", "alpha", "w_prev")):
        setattr(estimator, name, work[(6 + i) * S : (7 + i) * S])
    # sin outputs [cos φ, sin φ (2n) | load slope trig (6S)]; the estimator's trig buffer becomes a view of it
    sines = torch.zeros(2 * n + 6 * S, dtype=f64)
    sines[: 2 * n] = estimator.trig
    buffers["sines"] = sines
    estimator.trig = sines[: 2 * n]
    buffers["out_index"] = _out_index(o)
    buffers.update(_views(o, S, n, work, sines))
    return StepLayout(o, buffers)


def _out_index(o: Dict[str, int]) -> Tensor:
    """Where the output [τ | state] comes from in [Y | F] (one index_select)."""
    # out = [τ (2), θ (2), θ̇ (2) | η, w(L), w′(L), w″(0) (Y[3:k_lin]) | x, y | angle (Y[0]) | θ_d (2), hub loads
    # (2)]
    # from F = [τ, θ, θ̇, x, y, θ_d, hub loads] (12) at YF[n_y:]
    f0 = o["n_y"]
    order = list(range(f0, f0 + 6)) + list(range(3, o["k_lin"])) + [f0 + 6, f0 + 7, 0] + list(range(f0 + 8, f0 + 12))
    return torch.tensor(order, dtype=torch.int64)


def _views(o: Dict[str, int], S: int, n: int, work: Tensor, sines: Tensor) -> Dict[str, Tensor]:
    """The step's intermediate vectors: L, f_c (2S), ψ_m (S), and fixed views of them, of ``work`` and ``sines``."""
    f64 = torch.float64
    n_y, k_u2, k_z, k_fl, k_e, k_sin = o["n_y"], o["k_u2"], o["k_z"], o["k_fl"], o["k_e"], o["k_sin"]
    Lb = torch.zeros(k_fl + 6 * S, dtype=f64)
    fc = torch.zeros(2 * S, dtype=f64)
    Y = work[10 * S : 10 * S + n_y]
    return {
        "frame_in": work[: 6 * S].view(S, 6),
        "xz": work[: 10 * S],
        "zY": work[6 * S : 10 * S + n_y],
        "YF": work[10 * S :],
        "F": work[10 * S + n_y :],
        "L": Lb,
        "L_f": Lb[: 2 * S],
        "L_u1": Lb[2 * S : k_u2],
        "L_u2": Lb[k_u2:k_z],
        "L_zY": Lb[k_z:k_fl],
        "L_w": Lb[k_z + 3 * S : k_z + 4 * S],
        "L_fl": Lb[k_fl:],
        "f_c": fc,
        "f_cy": fc[:S],
        "f_cz": fc[S:],
        "psi_m": torch.zeros(S, dtype=f64),
        "Y_out": Y[:k_e],
        "Y_e": Y[k_e:k_sin],
        "Y_sin": Y[k_sin:],
        "s_trig": sines[: 2 * n],
        "s_load": sines[2 * n :],
    }
