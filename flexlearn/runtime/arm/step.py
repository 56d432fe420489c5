"""Precomputed matrices of the lean flexible-arm controller step (`flexlearn.runtime.arm.controller`).

The IMU estimator of seed 000, §II–IV (:class:`~flexlearn.physics.modal.FlexibleArmEstimator`, its readable
step) and the hub-load model (:class:`~flexlearn.runtime.arm.load.LinkLoadModel`) are linear between a few
nonlinear points (the compensation's products with the previous link angles, ``atan2``, ``sin``, the
three-way products of the loads). Each linear stretch is folded into one matrix at build time, so that a step
is ~15 small tensor kernels; the scalar rest (pose, loads, control law) runs on Python floats. With
``z = [ψ̂, b̂, α, ω_prev]`` (4S, the estimator's ``filter_state``), the frame over the sensor ranges ``x`` (6S,
row-major [acc / acc_range | gyr / gyr_range] per IMU: the quotient the validity test |x| < 1 computes anyway, so
A's frame columns carry the ranges) and the previous link angles as ``c = [cos φ, sin φ]`` (2n, the estimator's
``trig``):

    L  = a₀ + A [x; z]                    [f (2S) | u₁ | u₂ (S+n each) | z_lin (4S) | y₀ + P z_lin | fl (6S)]
    u  = u₁ ⊙ u₂                          [α′ (S), ω_ref² (n)]  (u₁ = [α′, ω_ref], u₂ = [1, ω_ref])
    f_c = f + T(c) u,   T(c) = Q (c ⊗ c)  rigid-chain + modal acceleration compensation (seed 000, §II)
    ψ_m = atan2(f_c,y, f_c,z)             eq. (2)
    z′ = z_lin + K ψ_m                    PI filter of eq. (6): ψ̂′ = ψ̂ + dt b̂ + k_p dt (ψ_m − ψ̂) + dt ω,
                                          b̂′ = b̂ + k_i dt (ψ_m − ψ̂); α′ = α + β((ω − ω_prev)/dt − α); ω_prev′ = ω
    Y  = y₀ + P z′ = (y₀ + P z_lin) + P K ψ_m   (one product with z′: [z′; Y] = L[…] + [K; PK] ψ_m)
                                          [angle, θ, η, w(L), w′(L), w″(0), θ̇ | e (6S) | sin arguments]
    s  = sin(Y[sin arguments])            [cos φ′, sin φ′ (2n) | local slope trig (6S)]
    Λ  = W (s_load ⊙ fl ⊙ e)              [Λ₁ − …, Λ₂ − …, F_a2, F_n2] of `LinkLoadModel.packed`

The controller keeps ``[x; z′; Y]`` in one buffer (``work``): the frame is copied in, ``L`` reads ``[x; z]``
and the ``[z′; Y]`` product is written behind it, so the estimator's filter state (views of ``work``) is updated
by that product. ``T(c)`` is quadratic in ``c``: the compensation rotates the world acceleration of IMU s (link l)
from the link angles into its frame, ``Σ_k c_k(φ_l) c_k'(φ_j)`` = sin / cos (φ_l − φ_j). ``e = [1 (4S), coup η,
coup η]`` puts the loads' η coupling into the same product. The kernels, the Python-float rest and the exact
float64 outputs (:func:`exact_f64`) bring the step to ≈ 0.37× the unfolded one (scripts/bench_arm_controller.py
``--baseline``); outputs equal the readable estimator + control law to ~3e-11 N m on the fault stream
(tests/runtime/test_arm_lean_step.py). ``f``: [f_y; f_z − Φ(ξ_s) G α′] (the elastic term, linear).
The same matrices drive `flexlearn.runtime.arm.graph` (the exportable graph), op for op.
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from flexlearn.runtime.arm.config import ArmSettingsError

__all__ = [
    "lean_step_maps",
    "exact_f64",
    "compensation_map",
    "initial_link_trig",
    "rest_sample",
    "RestSample",
    "gyro_bias_from_rest",
    "STEP_MAPS",
    "STEP_STATE",
    "STEP_INTS",
    "STEP_FLOATS",
]

# The step's settings and state by name: one list, read by the controller (TorchScript constants) and copied by its
# export twin (`flexlearn.runtime.arm.graph.ArmControllerGraph`).
STEP_MAPS = ("A", "a0", "Q", "KK", "W", "init_off", "init_map", "ranges")  # lean-step matrices (`arm.step`)
STEP_STATE = ("last_tau", "last_state", "cal", "gyr_count")  # controller state buffers
STEP_INTS = ("n_imus", "n_modes_total", "state_size", "k_u", "k_u2", "k_z", "k_fl", "k_lin", "k_e", "k_sin")
STEP_FLOATS = (
    "t0",
    "duration",
    "a11",
    "a12",
    "a22",
    "gA1",
    "gB1",
    "kA1",
    "kB1",
    "gB2",
    "kB2",
    "th00",
    "th01",
    "kp1",
    "kp2",
    "kd1",
    "kd2",
    "tmax1",
    "tmax2",
    "dt",
    "EI1",
    "EI2",
    "ff1",
    "ff2",
    "ff21",
    "L1",
    "L2",
    "lp_beta",
    "c11",
    "c12",
    "c21",
    "c22",
    "cal_gate",
)


def _in_map(est) -> Tensor:
    """Frames over the ranges x (6S, row-major [acc / acc_range | gyr / gyr_range] per IMU) → [f_y (S); f_z (S);
    ω_x (S)] [m/s², rad/s] (3S, 6S)."""
    S = int(est.n_imus)
    cols = torch.arange(6 * S).reshape(S, 6)
    m = torch.zeros(3 * S, 6 * S, dtype=torch.float64)
    m[:, cols[:, :3].reshape(-1)] = est.acc_map * float(est.acc_range)
    m[:, cols[:, 3:].reshape(-1)] = est.gyr_map * float(est.gyr_range)
    return m


def _compensation(est) -> Tensor:
    """Q (2S·(S+n), (2n)²): ``T(c) = (Q (c ⊗ c)).view(2S, S+n)``, the compensation with its sign (f_c = f + T u).
    For IMU s on link l and links j: ``Σ_k c_k(φ_l) n_k(φ_j) = sin(φ_l − φ_j)``, ``Σ_k c_k(φ_l) c_k(φ_j) =
    cos(φ_l − φ_j)`` rotate the world accelerations (lever, centripetal ω², modal tip terms) into the IMU frame."""
    S, n = int(est.n_imus), int(est.n_links)
    lever = est.lever_t.t()  # (S, n)
    after = est.after_t  # (n, S)
    tip = est.tip_el if est.elastic else torch.zeros_like(est.tip_el)  # (n, S)
    link = [int(v) for v in est.link_of_imu]
    ref = [int(v) for v in est.ref_index]
    N = 2 * n
    Q = torch.zeros(2 * S, S + n, N * N, dtype=torch.float64)

    def idx(p: int, q: int) -> int:
        """Column of the coefficient of c_p c_q in (c ⊗ c).

        Args:
            p: first index into c.
            q: second index into c.

        Returns:
            ``p N + q``.
        """
        return p * N + q

    for s in range(S):
        lo = link[s]
        for j in range(n):
            # sin(φ_l − φ_j) = s_l c_j − c_l s_j; cos(φ_l − φ_j) = c_l c_j + s_l s_j
            sin_t = [(idx(n + lo, j), 1.0), (idx(lo, n + j), -1.0)]
            cos_t = [(idx(lo, j), 1.0), (idx(n + lo, n + j), 1.0)]
            w_alpha = torch.zeros(S, dtype=torch.float64)  # weights of α′ in a_j (lever and modal tip terms)
            w_alpha[ref[j]] += lever[s, j]
            w_alpha += after[j, s] * tip[j]
            for k, sg in sin_t:  # f_y: S(α) − C(ω²); f_z: C(α) + S(ω²)
                Q[s, :S, k] += sg * w_alpha
                Q[S + s, S + j, k] += sg * lever[s, j]
            for k, sg in cos_t:
                Q[s, S + j, k] -= sg * lever[s, j]
                Q[S + s, :S, k] += sg * w_alpha
    return -Q.reshape(2 * S * (S + n), N * N)


def _output_map(est, coup: Tensor, trig_off: Tensor, trig_map: Tensor) -> Tuple[Tensor, Tensor]:
    """(P, y₀) of Y = y₀ + P z′ (module docstring), z′ = [ψ̂′, b̂′, α′, ω′] (4S): the estimate, rates, the loads' e
    (ones and the η coupling) and the sin arguments of the link angles and the loads' local slopes."""
    f64 = torch.float64
    S, n, M = int(est.n_imus), int(est.n_links), int(est.n_modes_total)
    pm, off = est.psi_map, est.offset
    k_lin = 1 + 4 * n + M

    def on_psi(m: Tensor) -> Tensor:
        out = torch.zeros(m.shape[0], 4 * S, dtype=f64)
        out[:, :S] = m
        return out

    rate = torch.zeros(n, 4 * S, dtype=f64)
    rate[:, S : 2 * S] = est.rate_map
    rate[:, 3 * S :] = est.rate_map
    ce = on_psi(coup @ pm[1 + n : 1 + n + M])
    load_rows = torch.cat([trig_map, trig_map[2 * S :]])
    load_off = torch.cat([trig_off, trig_off[2 * S :]])
    P = torch.cat(
        [on_psi(pm[:k_lin]), rate, torch.zeros(4 * S, 4 * S, dtype=f64), ce, ce, on_psi(pm[k_lin:]), on_psi(load_rows)]
    )
    zeros_n, zeros_2s = torch.zeros(n, dtype=f64), torch.zeros(2 * S, dtype=f64)
    y0 = torch.cat([off[:k_lin], zeros_n, torch.ones(4 * S, dtype=f64), zeros_2s, off[k_lin:], load_off])
    return P, y0


def _load_weights(mom_n: Tensor, force: Tensor, link_sum: Tensor, S: int) -> Tensor:
    """W (4, 6S): [Λ₁ − Σ e·f_a (link 1), Λ₂ − … (link 2), F_a2, F_n2] from the products [f_n | f_a | f_a e].

    The products are laid out (3, 2, S).
    """
    W = torch.zeros(4, 3, 2, S, dtype=torch.float64)
    for b in range(2):
        W[0, 0, b], W[1, 0, b] = mom_n[0], mom_n[1]
        W[0, 2, b], W[1, 2, b] = -link_sum[0], -link_sum[1]
        W[2, 1, b], W[3, 0, b] = force[1], force[1]
    return W.reshape(4, 6 * S).contiguous()


def lean_step_maps(
    est, trig_off: Tensor, trig_map: Tensor, coup: Tensor, mom_n: Tensor, force: Tensor, link_sum: Tensor
) -> Dict[str, Tensor]:
    """Lean-step matrices (module docstring) from a built estimator and the controller's two-link load model: ``A``,
    ``a0`` (L = a0 + A [x; z], rows [f (2S) | u₁ | u₂ (S+n each) | z_lin (4S) | y₀ + P z_lin | fl (6S)]), ``Q``, ``KK``
    ([z′; Y] = L[z_lin, Y rows] + KK ψ_m), ``init_off``/``init_map`` (c = sin(init_off + init_map ψ̂) for the first
    frame), ``W`` (4, 6S), by name; ArmSettingsError for an ``inclination="attitude"`` estimator.

    Args:
        est: the built `FlexibleArmEstimator` (PI inclination filter).
        trig_off: offset (4S,) of the local-slope trig (`LinkLoadModel.trig_of_slopes`).
        trig_map: map (4S, S) of the local-slope trig.
        coup: the load model's ``coup`` (S, M).
        mom_n: the load model's ``mom_n`` (n, S).
        force: the load model's ``force`` (n, S).
        link_sum: the load model's ``link_sum`` (n, S).
    """
    if bool(getattr(est, "use_attitude", False)):
        raise ArmSettingsError(
            "lean_step_maps: the lean step is the estimator's PI inclination filter written as matrices; "
            "an estimator built with inclination='attitude' has no such form (use the scripted step)"
        )
    f64 = torch.float64
    S, n, M = int(est.n_imus), int(est.n_links), int(est.n_modes_total)
    C = 10 * S  # columns [x (6S) | ψ, b, α, ω_prev]
    inm = _in_map(est)
    fy, fz, w = inm[:S], inm[S : 2 * S], inm[2 * S :]

    def on_x(m: Tensor) -> Tensor:
        out = torch.zeros(m.shape[0], C, dtype=f64)
        out[:, : 6 * S] = m
        return out

    def on_z(block: int, m: Tensor) -> Tensor:  # block 0..3 = ψ, b, α, ω_prev
        """The rows m placed in the columns of one z block (0..3 = ψ, b, α, ω_prev), zeros elsewhere.

        Args:
            block: the z block, 0..3.
            m: rows (r, S).

        Returns:
            (r, 10S).
        """
        out = torch.zeros(m.shape[0], C, dtype=f64)
        out[:, 6 * S + block * S : 6 * S + (block + 1) * S] = m
        return out

    eye = torch.eye(S, dtype=f64)
    beta, inv_dt, dt = float(est.beta_alpha), float(est.inv_dt), float(est.dt)
    if bool(est.compensate):  # α′ = (1 − β) α + (β/dt)(ω − ω_prev)
        alpha = on_z(2, (1.0 - beta) * eye) + on_z(3, -beta * inv_dt * eye) + on_x(beta * inv_dt * w)
    else:
        alpha = on_z(2, eye)
    fz_row = on_x(fz)
    if bool(est.compensate) and bool(est.elastic):
        fz_row = fz_row - est.own_el @ alpha
    kp, ki = float(est.k_p_dt), float(est.k_i_dt)
    psi = on_z(0, (1.0 - kp) * eye) + on_z(1, dt * eye) + on_x(dt * w)
    bias = on_z(0, -ki * eye) + on_z(1, eye)
    z_lin = torch.cat([psi, bias, alpha, on_x(w)])  # (4S, C)
    K = torch.cat([kp * eye, ki * eye, torch.zeros(2 * S, S, dtype=f64)])
    # Y = y0 + P z′ with z′ = [ψ̂′, b̂′, α′, ω′]
    pm, off = est.psi_map, est.offset
    k_lin = 1 + 4 * n + M
    P, y0 = _output_map(est, coup, trig_off, trig_map)
    fl = torch.cat([on_x(fy), on_x(fz)])
    wl = on_x(w[est.ref_index])
    A = torch.cat([on_x(fy), fz_row, alpha, wl, torch.zeros(S, C, dtype=f64), wl, z_lin, P @ z_lin, fl, fl, fl])
    a0 = torch.zeros(A.shape[0], dtype=f64)
    a0[3 * S + n : 4 * S + n] = 1.0  # u = u₁ ⊙ u₂, u₂ = [1 (S), ω_ref (n)]
    a0[8 * S + 2 * n : 8 * S + 2 * n + y0.numel()] = y0
    return {
        "A": A.contiguous(),
        "a0": a0,
        "Q": _compensation(est).contiguous(),
        "KK": torch.cat([K, P @ K]).contiguous(),
        "init_off": off[k_lin:].clone(),
        "init_map": pm[k_lin:].contiguous(),
        "W": _load_weights(mom_n, force, link_sum, S),
    }


def exact_f64(vals: List[float], out: Optional[Tensor] = None) -> Tensor:
    """Python floats → float64 tensor, bit for bit, in two kernels (three with ``out``).

    TorchScript's ``torch.tensor(List[float])`` rounds through float32, the default dtype, and ``scalar_tensor``
    costs a kernel per value. Each value's IEEE-754 bit pattern is assembled as an integer from ``math.frexp``
    (v = f 2^e, 0.5 ≤ |f| < 1: biased exponent e + 1022, mantissa field f 2^53 − 2^52, sign bit), put in an int64
    tensor and reinterpreted (``torch.view_copy(…, float64)``, a bit cast). Zero gives +0.0. Non-finite or
    subnormal values (|v| < 2.2e-308), and lists whose sum overflows, take one kernel per value (exact too).

    Args:
        vals: the values.
        out: (len(vals),) float64: written in place and returned.

    Returns:
        The float64 tensor (len(vals),).
    """
    bits = torch.jit.annotate(List[int], [])
    exact = math.isfinite(sum(vals))
    for v in vals:
        f, e = math.frexp(v)
        if e < -1021:  # subnormal (frexp's exponent of the smallest normal, 2^-1022, is -1021)
            exact = False
        if f > 0.0:
            bits.append((e + 1021) * 4503599627370496 + int(f * 9007199254740992.0))
        elif f < 0.0:  # the sign bit: −2^63 in two's complement
            bits.append((e + 1021) * 4503599627370496 + int(-f * 9007199254740992.0) - 9223372036854775807 - 1)
        else:
            bits.append(0)
    if exact:
        res = torch.view_copy(torch.tensor(bits), torch.float64)
    else:
        res = torch.stack([torch.scalar_tensor(v, dtype=torch.float64) for v in vals])
    if out is None:
        return res
    return out.copy_(res)


# ------------------------------------------------------------------------------------------------------------------
# Pure pieces of the step that the scripted controller (`flexlearn.runtime.arm.controller.ArmController`) and its
# branch-free export twin (`flexlearn.runtime.arm.graph.ArmControllerGraph`) both call: one owner each, op for op.


def compensation_map(Q: Tensor, trig: Tensor, n_imus: int, n_links: int) -> Tensor:
    """The compensation's matrix ``T(c) = (Q (c ⊗ c)).view(2S, S + n)`` (module docstring; f_c = f + T(c) u).

    Args:
        Q: the folded compensation map (2S·(S + n), (2n)²) of `lean_step_maps`.
        trig: c = [cos φ, sin φ] (2n,) of the previous link angles.
        n_imus: S.
        n_links: n.

    Returns:
        T(c) (2S, S + n).
    """
    return torch.mv(Q, torch.outer(trig, trig).view(-1)).view(2 * n_imus, n_imus + n_links)


def initial_link_trig(init_off: Tensor, init_map: Tensor, psi: Tensor) -> Tensor:
    """Link-angle trig [cos φ, sin φ] (2n,) of the first frame, from its inclinations ψ̂ = ψ_m (S,) [rad].

    Args:
        init_off: offsets of the sin arguments (2n,) [rad] (``lean_step_maps()["init_off"]``).
        init_map: their map from ψ̂ (2n, S) (``lean_step_maps()["init_map"]``).
        psi: the first frame's inclinations (S,) [rad].

    Returns:
        sin(init_off + init_map ψ̂) (2n,).
    """
    return torch.sin(torch.addmv(init_off, init_map, psi))


class RestSample(NamedTuple):
    """One sample of the gyro rest calibration (`rest_sample`)."""

    integral: Tensor  # ∫ω dt (S,) [rad], this sample included
    mask: Tensor  # 1.0 where the sample enters the fit, else 0.0 (S,)
    residual: Tensor  # mask · r, r = ∫ω dt − ψ_m (S,) [rad]


def rest_sample(integral: Tensor, fl: Tensor, w: Tensor, psi: Tensor, dt: float, gate: float) -> RestSample:
    """One sample of the gyro rest calibration: the line through r(t) = ∫ω dt − ψ_m(t) has the gyro bias as slope.

    ψ_m = atan2(f_y, f_z) is the uncompensated accelerometer inclination (the arm is near rest before t0);
    samples with |ψ_m − ψ̂| ≥ ``gate`` (high-mode transients after torque steps) are left out of the fit but not of
    ∫ω. The sums [count, Σt, Σt², Σr, Σtr] grow by [m, m t, m t², m r, m r t] (exact products for the 0/1 mask m,
    so an in-place ``add_(m, alpha=t)`` and ``m * t`` give the same bits).

    Args:
        integral: ∫ω dt (S,) [rad] before this sample.
        fl: raw link-frame specific forces [f_y; f_z] (2S,) [m/s²].
        w: gyro rates (S,) [rad/s].
        psi: the filter's new inclinations ψ̂ (S,) [rad].
        dt: step [s].
        gate: largest accepted |ψ_m − ψ̂| [rad].

    Returns:
        The new integral, the mask and the masked residual (`RestSample`).
    """
    S = w.shape[0]
    c5 = torch.add(integral, w, alpha=dt)
    psi_m = torch.atan2(fl[:S], fl[S : 2 * S])
    m = ((psi_m - psi).abs() < gate).to(torch.float64)
    return RestSample(c5, m, m * (c5 - psi_m))


def gyro_bias_from_rest(cal: Tensor) -> Tuple[Tensor, Tensor]:
    """The gyro bias estimate b̂ = −β at the end of the rest period, β the slope of the rest line.

    The rest line is fitted through the sums of the accepted `rest_sample` calls.

    Args:
        cal: sums (6, S), rows [count, Σt, Σt², Σr, Σtr, ∫ω dt] of the accepted `rest_sample` calls.

    Returns:
        (b̂ (S,) [rad/s], ok (S,) bool: at least 200 accepted samples and a regular fit; b̂ is meaningless elsewhere).
    """
    den = cal[0] * cal[2] - cal[1] * cal[1]
    ok = (cal[0] >= 200.0) & (den > 0.0)
    beta = (cal[4] * cal[0] - cal[3] * cal[1]) / torch.where(ok, den, torch.ones_like(den))
    return -beta, ok
