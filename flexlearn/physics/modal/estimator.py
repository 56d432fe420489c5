"""Real-time reduced-model estimator for a planar serial flexible arm (seed 000, §II–IV, Remark 2).

One step (1 kHz in the seed) maps raw 6-axis frames of all IMUs to joint states, modal coordinates,
link deformation and the end-effector pose:

1. validity: every frame finite and below saturation, else hold the last valid output and flag;
2. mounting → link frames (:class:`~flexlearn.sensing.imu.ImuMount`), subtraction of the rigid-chain
   linear acceleration of each IMU (optional, default on; previous step's link angles, reference-gyro
   rates and their low-passed derivative), gravity-referenced inclinations ψ = atan2(f_y, f_z)
   (seed 000, eq. (2)) and gyro rates ω_x;
3. the PI complementary filter of eq. (6) on every IMU's absolute inclination (ψ̂, bias b̂). Every
   later quantity is linear in ψ̂, and the filter is linear and time-invariant, so filtering each IMU
   and then differencing equals the seed's filtering of joint angles (eq. (2)) with joint rates
   (eq. (5)), while the slopes used for the deformation are filtered as well. Option
   ``inclination="attitude"``: instead, per IMU the VQF-type attitude filter of
   :mod:`flexlearn.sensing.attitude.kernels` on the compensated link-frame accelerometer and the gyro
   (measured against the default in ``scripts/bench_attitude.py --vibrating-link``, ``docs/attitude.md``);
4. modal coordinates of every link from the relative slopes to its reference IMU (eq. (18)) and tip
   deflection w(L), tip slope w′(L), base curvature w″(0), joint angles
   ``θ_i = (ψ̂_{r,i} − w′_i(l_r)) − (φ_{i−1} + w′_{i−1}(L))`` (link-i base angle relative to the
   deformed tip frame of link i−1): one matmul ``y = P ψ̂``;
5. joint rates ``ω̂_{r,i} − ω̂_{last,i−1}`` (eq. (5), bias-corrected gyros);
6. flexibility-aware forward kinematics on SE(2) (§IV), closed form.

IMU order: link by link, the reference IMU first, then the slope IMUs in the order given.
"""

import math
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.config import check
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.physics.modal.reconstruction import ModalReconstructor
from flexlearn.sensing.attitude.kernels import output as att_output
from flexlearn.sensing.attitude.kernels import step as att_step
from flexlearn.sensing.attitude.offline import AttitudeConfig, initial_state, make_params
from flexlearn.sensing.imu import GRAVITY, ComplementaryFilter, ImuMount

__all__ = ["EstimatorOptions", "EstimatorParts", "FlexibleArmEstimator"]


@dataclass(frozen=True)
class EstimatorOptions:
    """Settings of :meth:`FlexibleArmEstimator.build` (seed 000, §II–IV; defaults: the seed's 1 kHz estimator).

    Attributes:
        mount_angles: per IMU, the mounting angle about the link axis [rad] (:class:`~flexlearn.sensing.imu.ImuMount`;
            None: all 0).
        mount_flipped: per IMU, mounted upside down (None: none).
        dt: step [s].
        k_p: proportional gain of the PI complementary filter of eq. (6) [1/s].
        k_i: integral gain of that filter [1/s²].
        acc_range: accelerometer saturation limit [m/s²].
        gyr_range: gyro saturation limit [rad/s].
        regularization: Tikhonov weight of the modal reconstruction (eq. (18), :class:`ModalReconstructor`).
        compensate: subtract the rigid-chain linear acceleration of every IMU before eq. (2)
            (:func:`flexlearn.sensing.imu.kinematic_acceleration`; angular accelerations from the reference
            gyros, differentiated and low-passed with ``tau_alpha``).
        tau_alpha: time constant of that low-pass [s].
        elastic: (with ``compensate``) also subtract the deflection accelerations ``Φ(ξ_s) η̈`` with ``η̈ = G α``
            from the differentiated rates of all IMUs (the runtime's own modal model).
        modal_rates: joint rates as the time derivative of the joint-angle map applied to the gyros,
            ``θ̇ = P_θ ω̂`` (link-i base rate = reference gyro minus the modal slope rate at l_r, minus the previous
            link's modal tip-slope rate), instead of eq. (5)'s ``ω̂_{r,i} − ω̂_{last,i−1}`` (which takes the last
            IMU's rotation for the tip's: in closed loop a high mode that turns the tip and that IMU differently
            feeds the joint-2 damping term).
        inclination: ``"complementary"`` (default) the PI filter of eq. (6) on ψ = atan2(f_y, f_z);
            ``"attitude"``: per IMU the attitude filter of :mod:`flexlearn.sensing.attitude.kernels` (VQF-type) on
            the compensated link-frame accelerometer (f_x, f_y, f_z) and the link-frame gyro, ψ̂ = atan2(u_y, u_z)
            with u = R(q̂)ᵀ e_z and b̂ = −(its gyro bias)_x (slower per step: one scalar filter per IMU).
        attitude: the attitude filter's :class:`~flexlearn.sensing.attitude.offline.AttitudeConfig` (None:
            defaults); used with ``inclination="attitude"``.
    """

    mount_angles: Optional[Sequence[float]] = None
    mount_flipped: Optional[Sequence[bool]] = None
    dt: float = 1e-3
    k_p: float = 7.0407
    k_i: float = 0.1984
    acc_range: float = 6.0 * GRAVITY
    gyr_range: float = math.radians(300.0)
    regularization: float = 0.0
    compensate: bool = True
    tau_alpha: float = 0.05
    elastic: bool = True
    modal_rates: bool = False
    inclination: str = "complementary"
    attitude: Optional[AttitudeConfig] = None


@dataclass(frozen=True)
class EstimatorParts:
    """What :meth:`FlexibleArmEstimator.build` folds from the links and options (S IMUs, M modes, n links).

    Attributes:
        in_map: (3S, 6S) raw frames ``cat([acc, gyr], 1).reshape(-1)`` → link-frame (f_y (S), f_z (S), ω_x (S)).
        inv_range: (6S,) reciprocal saturation limits per frame entry [s²/m, s/rad].
        psi_map: (1 + M + 5n, S) filtered inclinations → [end-effector angle, θ (n), η (M), w(L), w′(L), w″(0),
            absolute link base angles (n each)].
        rate_map: (n, S) bias-corrected gyro rates → joint rates.
        lengths: (n,) link lengths [m].
        n_imus: S.
        n_modes_total: M = Σ modes of all links.
        lever: (S, n) distances of every IMU from the joints before it [m].
        link_of_imu: (S,) long, the link each IMU sits on.
        ref_index: (n,) long, the reference IMU of each link.
        mount: (S, 3, 3) mounting rotations sensor → link.
        own_el: (S, S) deflection at every IMU from its link's η = G ψ (None: no elastic compensation).
        tip_el: (n, S) tip deflection of every link (None: no elastic compensation).
        attitude_params: parameters of the attitude-filter kernel (None: the PI filter of eq. (6)).
    """

    in_map: Tensor
    inv_range: Tensor
    psi_map: Tensor
    rate_map: Tensor
    lengths: Tensor
    n_imus: int
    n_modes_total: int
    lever: Tensor
    link_of_imu: Tensor
    ref_index: Tensor
    mount: Tensor
    own_el: Optional[Tensor] = None
    tip_el: Optional[Tensor] = None
    attitude_params: Optional[List[float]] = None


class _LinkMatrices(NamedTuple):
    """Per-link blocks of :meth:`FlexibleArmEstimator.build` (S IMUs, M modes, n links): ``G`` (M, S) η = G ψ
    (eq. (18)); ``H`` (4, n, M) rows of tip deflection, tip slope, base curvature and reference slope;
    ``E_ref``/``E_last`` (n, S) pick each link's reference / last IMU; ``lengths`` [m]; ``lever`` (S, n) [m]
    distances of every IMU from the joints before it; ``Phi_pos`` (S, M) mode shapes at the IMUs;
    ``link_of_imu`` (S,)."""

    G: Tensor
    H: Tensor
    E_ref: Tensor
    E_last: Tensor
    lengths: List[float]
    lever: Tensor
    Phi_pos: Tensor
    link_of_imu: Tensor


def _link_matrices(
    links: Sequence[FlexibleLink],
    imu_positions: Sequence[Sequence[float]],
    n_modes: Sequence[int],
    regularization: float,
) -> _LinkMatrices:
    """Modal reconstruction of every link (:class:`ModalReconstructor`, eq. (18)) stacked into the blocks of
    :class:`_LinkMatrices`; raises ConfigError for too few IMUs for the modes of a link."""
    n = len(links)
    S = sum(len(p) for p in imu_positions)
    M = sum(n_modes)
    f64 = torch.float64
    G = torch.zeros(M, S, dtype=f64)  # η = G ψ
    H = torch.zeros(4, n, M, dtype=f64)  # tip, tip slope, base curvature, reference slope
    E_ref = torch.zeros(n, S, dtype=f64)
    E_last = torch.zeros(n, S, dtype=f64)
    lengths: List[float] = []
    lever = torch.zeros(S, n, dtype=f64)
    Phi_pos = torch.zeros(S, M, dtype=f64)
    link_of_imu = torch.zeros(S, dtype=torch.long)
    s0 = m0 = 0
    for i, (link, pos, m) in enumerate(zip(links, imu_positions, n_modes)):
        check(m >= 1, f"estimator.n_modes[{i}]", m, "must be >= 1")
        check(
            len(pos) >= m + 1,
            f"estimator.imu_positions[{i}]",
            list(pos),
            f"need {m} slope IMUs plus one reference IMU for {m} modes",
        )
        rec = ModalReconstructor.from_link(
            link, list(pos[1:]), m, reference=float(pos[0]), regularization=regularization
        )
        k = len(pos)
        G[m0 : m0 + m, s0 + 1 : s0 + k] = rec.gain
        G[m0 : m0 + m, s0] = -rec.gain.sum(-1)
        H[0, i, m0 : m0 + m] = rec.tip_row
        H[1, i, m0 : m0 + m] = rec.tip_slope_row
        H[2, i, m0 : m0 + m] = rec.base_curvature_row
        H[3, i, m0 : m0 + m] = rec.ref_slope_row
        Phi_pos[s0 : s0 + k, m0 : m0 + m] = link.mode_shapes(torch.tensor(list(pos), dtype=f64), m, 0).reshape(k, m)
        for j, xi in enumerate(pos):
            lever[s0 + j, :i] = torch.tensor([float(lk.length) for lk in links[:i]], dtype=f64)
            lever[s0 + j, i] = float(xi)
            link_of_imu[s0 + j] = i
        E_ref[i, s0] = 1.0
        E_last[i, s0 + k - 1] = 1.0
        lengths.append(float(link.length))
        s0 += k
        m0 += m
    return _LinkMatrices(G, H, E_ref, E_last, lengths, lever, Phi_pos, link_of_imu)


def _frame_map(
    S: int, mount_angles: Optional[Sequence[float]], mount_flipped: Optional[Sequence[bool]]
) -> Tuple[Tensor, Tensor]:
    """``in_map`` (3S, 6S): raw frames ``cat([acc, gyr], 1).reshape(-1)`` → link-frame (f_y (S), f_z (S), ω_x (S)),
    and the mounting rotations sensor → link (S, 3, 3) (:class:`~flexlearn.sensing.imu.ImuMount`)."""
    f64 = torch.float64
    ang = torch.zeros(S, dtype=f64) if mount_angles is None else torch.as_tensor(mount_angles, dtype=f64)
    fl = torch.zeros(S, dtype=torch.bool) if mount_flipped is None else torch.as_tensor(mount_flipped)
    check(ang.numel() == S, "estimator.mount_angles", ang.numel(), f"need one per IMU ({S})")
    Mnt = ImuMount(ang, fl).matrix  # (S, 3, 3)
    in_map = torch.zeros(3 * S, 6 * S, dtype=f64)
    for s in range(S):
        in_map[s, 6 * s : 6 * s + 3] = Mnt[s, 1]  # f_y in the link frame
        in_map[S + s, 6 * s : 6 * s + 3] = Mnt[s, 2]  # f_z
        in_map[2 * S + s, 6 * s + 3 : 6 * s + 6] = Mnt[s, 0]  # ω_x
    return in_map, Mnt


def _output_maps(lm: _LinkMatrices, n: int, modal_rates: bool) -> Tuple[Tensor, Tensor]:
    """``psi_map`` (1 + M + 5n, S): filtered inclinations → [end-effector angle, θ (n), η (M), w(L), w′(L), w″(0),
    absolute link base angles (n each)]; ``rate_map`` (n, S): gyro rates → joint rates (eq. (5), or
    ``P_θ`` with ``modal_rates``)."""
    f64 = torch.float64
    G, H = lm.G, lm.H
    shift = torch.diag(torch.ones(n - 1, dtype=f64), -1)  # (shift v)_i = v_{i−1}
    rate_map = lm.E_ref - shift @ lm.E_last  # joint rates (eq. (5))
    tip, slope, curv, refs = H[0] @ G, H[1] @ G, H[2] @ G, H[3] @ G
    phi = lm.E_ref - refs  # absolute link base angles
    theta_m = phi - shift @ (phi + slope)
    lower = torch.tril(torch.ones(n, n, dtype=f64), -1)  # Σ_{k<i}
    cum = torch.tril(torch.ones(n, n, dtype=f64))  # Σ_{k≤i}
    ph = cum @ theta_m + lower @ slope  # absolute base angles of the links (after the filter)
    if modal_rates:
        rate_map = theta_m.clone()
    ang = theta_m.sum(0, keepdim=True) + slope.sum(0, keepdim=True)  # end-effector angle
    return torch.cat([ang, theta_m, G, tip, slope, curv, ph], 0), rate_map


def _attitude_start(params: Optional[List[float]]) -> List[float]:
    """Start state of the attitude filter for kernel parameters ``params`` ([0.0] when unused)."""
    if params is None:
        return [0.0]
    return [float(x) for x in initial_state(np.asarray(params, dtype=np.float64))]


class FlexibleArmEstimator(nn.Module):
    """Scriptable runtime estimator (see module docstring). Build with :meth:`build`.

    ``forward(acc (S, 3) [m/s²], gyr (S, 3) [rad/s])`` → ``(pose (3,) [x m, y m, angle rad (unwrapped)],
    theta (n,) [rad], theta_rate (n,) [rad/s], eta (Σm,), tip_deflection (n,) [m], tip_slope (n,) [rad],
    base_curvature (n,) [1/m], fault (bool tensor))``. Never returns NaN: a non-finite or saturated
    frame (a missing IMU is given as NaN) holds the last valid output and sets ``fault``.

    Everything between the raw frames and the filter is linear in (acc, gyr) or in the inclinations, so
    it is folded at build time into two matrices (``in_map``: frames → (f_y, f_z, joint rates);
    ``psi_map``: filtered inclinations → (end-effector angle, θ, η, w(L), w′(L), w″(0), absolute link
    angles)), and ``rate_map`` maps bias-corrected gyro rates to joint rates; a step costs about 35
    TorchScript ops.
    """

    # registered buffers (see __init__)
    acc_map: Tensor
    gyr_map: Tensor
    rate_map: Tensor
    inv_range: Tensor
    psi_map: Tensor
    offset: Tensor
    lengths: Tensor
    filter_state: Tensor
    psi_hat: Tensor
    bias_hat: Tensor
    initialized: Tensor
    last_out: Tensor
    fault_true: Tensor
    lever_t: Tensor
    sign2: Tensor
    rot90: Tensor
    trig: Tensor
    link_of_imu: Tensor
    ref_index: Tensor
    alpha: Tensor
    w_prev: Tensor
    own_el: Tensor
    tip_el: Tensor
    after_t: Tensor
    fault_false: Tensor
    frame_link: Tensor
    mount: Tensor
    use_attitude: bool
    att_p: List[float]
    att_s0: List[float]
    att_s: List[List[float]]

    def __init__(self, parts: EstimatorParts, options: EstimatorOptions) -> None:
        """Hold the folded maps as buffers and the filter gains as floats (use :meth:`build`).

        Args:
            parts: the maps and per-IMU tables folded by :meth:`build`.
            options: the gains, step, compensation switches (``dt``, ``k_p``, ``k_i``, ``compensate``,
                ``tau_alpha`` are read here).
        """
        super().__init__()
        in_map, inv_range, psi_map, lengths = parts.in_map, parts.inv_range, parts.psi_map, parts.lengths
        n_imus, own_el, tip_el, link_of_imu = parts.n_imus, parts.own_el, parts.tip_el, parts.link_of_imu
        dt = options.dt
        self.n_links = int(lengths.numel())
        self.n_imus = n_imus
        self.n_modes_total = parts.n_modes_total
        self.k_p_dt = float(options.k_p * dt)
        self.k_i_dt = float(options.k_i * dt)
        self.dt = float(dt)
        S6 = 6 * n_imus
        cols = torch.arange(S6).reshape(n_imus, 6)
        self.register_buffer("acc_map", in_map[:, cols[:, :3].reshape(-1)].contiguous())  # (3S, 3S)
        self.register_buffer("gyr_map", in_map[:, cols[:, 3:].reshape(-1)].contiguous())  # (3S, 3S)
        self.acc_range = float(1.0 / float(inv_range[0]))
        self.gyr_range = float(1.0 / float(inv_range[3]))
        self.register_buffer("rate_map", parts.rate_map)  # (n, S)
        self.register_buffer("inv_range", inv_range)  # (6S,)
        n0 = int(lengths.numel())
        self.register_buffer("psi_map", torch.cat([psi_map, psi_map[-n0:]], 0))  # (1 + M + 6n, S)
        offset = torch.zeros(psi_map.shape[0] + n0, dtype=torch.float64)
        offset[-2 * n0 : -n0] = 0.5 * math.pi  # sin(φ + π/2) = cos φ
        self.register_buffer("offset", offset)
        self.register_buffer("lengths", lengths)
        n = self.n_links
        # filter state [ψ̂ (S), b̂ (S), α (S), ω_prev (S)] in one buffer; psi_hat, bias_hat, alpha and w_prev are
        # views of it (the controller's lean step updates all four with one copy)
        fs = torch.zeros(4 * n_imus, dtype=torch.float64)
        self.register_buffer("filter_state", fs)
        self.register_buffer("psi_hat", fs[0:n_imus])
        self.register_buffer("bias_hat", fs[n_imus : 2 * n_imus])
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))
        self.register_buffer("last_out", torch.zeros(3 + 2 * n + parts.n_modes_total + 3 * n, dtype=torch.float64))
        self.register_buffer("fault_true", torch.ones((), dtype=torch.bool))
        self.compensate = bool(options.compensate)
        self.inv_dt = float(1.0 / dt)
        self.beta_alpha = float(dt / (options.tau_alpha + dt))
        self.register_buffer("lever_t", parts.lever.t().contiguous())  # (n, S)
        self.register_buffer("sign2", torch.tensor([[-1.0], [1.0]], dtype=torch.float64))
        self.register_buffer("rot90", torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64))
        self.register_buffer("trig", torch.zeros(2 * n, dtype=torch.float64))
        self.register_buffer("link_of_imu", link_of_imu)  # (S,)
        self.register_buffer("ref_index", parts.ref_index)  # (n,)
        self.register_buffer("alpha", fs[2 * n_imus : 3 * n_imus])
        self.register_buffer("w_prev", fs[3 * n_imus :])
        self.elastic = own_el is not None
        self.register_buffer(
            "own_el", own_el if own_el is not None else torch.zeros(n_imus, n_imus, dtype=torch.float64)
        )
        self.register_buffer("tip_el", tip_el if tip_el is not None else torch.zeros(n, n_imus, dtype=torch.float64))
        after = (link_of_imu.unsqueeze(0) > torch.arange(n).unsqueeze(1)).to(torch.float64)  # (n, S)
        self.register_buffer("after_t", after)
        self.register_buffer("fault_false", torch.zeros((), dtype=torch.bool))
        # link-frame readings of the last valid frame [f_y (S); f_z (S); ω_x (S)] before any compensation
        self.register_buffer("frame_link", torch.zeros(3 * n_imus, dtype=torch.float64))
        # inclination="attitude": kernel parameters, one kernel state per IMU (updated in place), start state
        attitude_params = parts.attitude_params
        self.use_attitude = attitude_params is not None
        self.att_p = list(attitude_params) if attitude_params is not None else [0.0]
        self.att_s0 = _attitude_start(attitude_params)
        self.att_s = [list(self.att_s0) for _ in range(n_imus if self.use_attitude else 0)]
        self.register_buffer("mount", parts.mount)

    @classmethod
    def build(
        cls,
        links: Sequence[FlexibleLink],
        imu_positions: Sequence[Sequence[float]],
        n_modes: Sequence[int],
        options: Optional[EstimatorOptions] = None,
    ) -> "FlexibleArmEstimator":
        """The estimator of ``links`` with IMUs at ``imu_positions``, folded into its maps (module docstring).

        Args:
            links: one scalar :class:`FlexibleLink` per link.
            imu_positions: per link, the IMU positions along it [m], the reference IMU first.
            n_modes: retained modes per link (each link needs one slope IMU per mode besides the reference).
            options: gains, step, saturation limits, compensation and inclination filter
                (:class:`EstimatorOptions`; defaults if None).

        Returns:
            The estimator (eager; ``torch.jit.script`` it for the runtime).

        Raises:
            ConfigError: configuration errors (unobservable placement, wrong counts, bad gains or ranges).
        """
        o = options if options is not None else EstimatorOptions()
        check(
            len(links) == len(imu_positions) == len(n_modes) and len(links) >= 1,
            "estimator.links",
            (len(links), len(imu_positions), len(n_modes)),
            "links, imu_positions and n_modes must match",
        )
        check(o.acc_range > 0 and o.gyr_range > 0, "estimator.acc_range", (o.acc_range, o.gyr_range), "must be > 0")
        check(
            o.inclination in ("complementary", "attitude"),
            "estimator.inclination",
            o.inclination,
            "must be 'complementary' or 'attitude'",
        )
        ComplementaryFilter(o.k_p, o.k_i, o.dt)  # validates the gains
        n = len(links)
        lm = _link_matrices(links, imu_positions, n_modes, o.regularization)
        S, M = lm.lever.shape[0], lm.G.shape[0]
        in_map, mount = _frame_map(S, o.mount_angles, o.mount_flipped)
        psi_map, rate_map = _output_maps(lm, n, o.modal_rates)
        f64 = torch.float64
        inv = torch.cat(
            [torch.full((S, 3), 1.0 / o.acc_range, dtype=f64), torch.full((S, 3), 1.0 / o.gyr_range, dtype=f64)], 1
        ).reshape(-1)
        check(o.tau_alpha > 0, "estimator.tau_alpha", o.tau_alpha, "must be > 0")
        own_el = tip_el = None
        if o.elastic:
            own_el = lm.Phi_pos @ lm.G  # (S, S): deflection at every IMU from its link's η = G ψ
            tip_el = lm.H[0] @ lm.G  # (n, S): tip deflection of every link
        att = None
        if o.inclination == "attitude":
            att = [float(x) for x in make_params(1.0 / o.dt, o.attitude)]
        parts = EstimatorParts(
            in_map=in_map,
            inv_range=inv,
            psi_map=psi_map,
            rate_map=rate_map,
            lengths=torch.tensor(lm.lengths, dtype=f64),
            n_imus=S,
            n_modes_total=M,
            lever=lm.lever,
            link_of_imu=lm.link_of_imu,
            ref_index=lm.E_ref.argmax(-1),
            mount=mount,
            own_el=own_el,
            tip_el=tip_el,
            attitude_params=att,
        )
        return cls(parts, o)

    @torch.jit.export
    def reset(self) -> None:
        self.psi_hat.zero_()
        self.bias_hat.zero_()
        self.trig.zero_()
        self.alpha.zero_()
        self.w_prev.zero_()
        self.initialized.fill_(False)
        self.last_out.zero_()
        self.frame_link.zero_()
        for st in self.att_s:
            for i in range(len(self.att_s0)):
                st[i] = self.att_s0[i]

    @torch.jit.export
    def step(self, acc: Tensor, gyr: Tensor) -> Tuple[Tensor, Tensor]:
        """Packed output ``[pose (3), θ (n), η (M), w(L) (n), w′(L) (n), w″(0) (n), θ̇ (n)]`` and fault.

        Args:
            acc: raw accelerometer frames of all S IMUs (S, 3) [m/s²], IMU order as in the module docstring.
            gyr: raw gyro frames of all S IMUs (S, 3) [rad/s].

        Returns:
            ``(out, fault)``: the packed output above and a bool scalar, True (with the last valid output held)
            when a frame is NaN, infinite or saturated.
        """
        # max |x| in one op (NaN propagates, so NaN fails the comparison)
        if not (
            float(torch.linalg.vector_norm(acc, float("inf"))) < self.acc_range
            and float(torch.linalg.vector_norm(gyr, float("inf"))) < self.gyr_range
        ):
            if self.use_attitude:  # the attitude filters count the missing sample (gap bridging, recovery)
                nan = float("nan")
                for st in self.att_s:
                    att_step(st, self.att_p, nan, nan, nan, nan, nan, nan, 0.0, 0.0, 0.0, False)
            return self.last_out.clone(), self.fault_true  # NaN, inf or saturated frame
        S = self.n_imus
        n = self.n_links
        M = self.n_modes_total
        v = torch.addmv(torch.mv(self.acc_map, acc.reshape(-1)), self.gyr_map, gyr.reshape(-1))
        self.frame_link.copy_(v)
        w = v[2 * S :]
        fy = v[:S]
        fz = v[S : 2 * S]
        if not bool(self.initialized):
            self.psi_hat.copy_(torch.atan2(fy, fz))
            self.trig.copy_(torch.sin(torch.addmv(self.offset, self.psi_map, self.psi_hat)[1 + 4 * n + M :]))
            self.w_prev.copy_(w)
            self.initialized.fill_(True)
        if self.compensate:
            # rigid-chain linear acceleration of every IMU (sensing.imu.kinematic_acceleration), with the
            # previous step's link angles (cos, sin in ``trig``) and the reference gyros' rates and
            # low-passed derivatives; world components per unit lever, then rotated into each IMU frame
            # plus (elastic) the modal accelerations η̈ = G α_imu from the differentiated slope rates: the
            # IMU's own deflection acceleration (normal to its link) and, for distal links, the tip
            # deflection accelerations of the links before (normal to those links)
            self.alpha.add_((w - self.w_prev) * self.inv_dt - self.alpha, alpha=self.beta_alpha)
            self.w_prev.copy_(w)
            wl = w[self.ref_index]
            cs = self.trig.view(2, n)  # [cos φ; sin φ]
            nrm = self.sign2 * cs.flip(0)  # link normals [−sin φ; cos φ]
            aw = nrm * self.alpha[self.ref_index] - cs * (wl * wl)  # [a_x; a_y] per unit lever (2, n)
            a = torch.mm(aw, self.lever_t)  # world acceleration of every IMU (2, S)
            if self.elastic:
                a = a + torch.mm(nrm * torch.mv(self.tip_el, self.alpha), self.after_t)
            ci = cs[:, self.link_of_imu]  # cos, sin of the IMU's link angle (2, S)
            fy = fy - (ci * a).sum(0)
            fz = fz - (self.sign2 * ci.flip(0) * a).sum(0)
            if self.elastic:
                fz = fz - torch.mv(self.own_el, self.alpha)
        if self.use_attitude:
            self._attitude_update(acc, gyr, fy, fz)
        else:
            psi_m = torch.atan2(fy, fz)
            e = psi_m - self.psi_hat
            self.psi_hat.add_(self.bias_hat, alpha=self.dt).add_(e, alpha=self.k_p_dt).add_(w, alpha=self.dt)
            self.bias_hat.add_(e, alpha=self.k_i_dt)
        # y = [angle, θ (n), η (M), w(L), w′(L), w″(0), φ + π/2 (n), φ (n)]
        y = torch.addmv(self.offset, self.psi_map, self.psi_hat)
        trig = torch.sin(y[1 + 4 * n + M :])  # [cos φ, sin φ]
        self.trig.copy_(trig)
        rate = torch.mv(self.rate_map, w + self.bias_hat)
        cs2 = trig.view(2, n)
        pos = torch.mv(cs2, self.lengths) + torch.mv(self.rot90, torch.mv(cs2, y[1 + n + M : 1 + 2 * n + M]))
        out = torch.cat([pos, y[: 1 + 4 * n + M], rate])
        self.last_out.copy_(out)
        return out, self.fault_false

    def _attitude_update(self, acc: Tensor, gyr: Tensor, fy: Tensor, fz: Tensor) -> None:
        """ψ̂, b̂ from one attitude-filter step per IMU on the link-frame gyro and the compensated link-frame
        accelerometer (f_x, f_y, f_z): ψ̂ = atan2(u_y, u_z), u = R(q̂)ᵀ e_z = (·, 2(yz + wx), 1 − 2(x² + y²))."""
        S = self.n_imus
        a: List[List[float]] = torch.bmm(self.mount, acc.reshape(S, 3, 1)).reshape(S, 3).tolist()
        g: List[List[float]] = torch.bmm(self.mount, gyr.reshape(S, 3, 1)).reshape(S, 3).tolist()
        fyl: List[float] = fy.tolist()
        fzl: List[float] = fz.tolist()
        psi: List[Tensor] = []
        bias: List[Tensor] = []
        for i in range(S):
            st = self.att_s[i]
            att_step(st, self.att_p, g[i][0], g[i][1], g[i][2], a[i][0], fyl[i], fzl[i], 0.0, 0.0, 0.0, False)
            w, x, y, z = att_output(st, False)
            psi.append(
                torch.scalar_tensor(math.atan2(2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)), dtype=torch.float64)
            )
            bias.append(torch.scalar_tensor(-st[12], dtype=torch.float64))
        self.psi_hat.copy_(torch.stack(psi))
        self.bias_hat.copy_(torch.stack(bias))

    def forward(
        self, acc: Tensor, gyr: Tensor
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """One step, the packed output of :meth:`step` split into its parts.

        Args:
            acc: raw accelerometer frames of all S IMUs (S, 3) [m/s²].
            gyr: raw gyro frames of all S IMUs (S, 3) [rad/s].

        Returns:
            ``(pose (3), θ (n), θ̇ (n), η (M), w(L) (n), w′(L) (n), w″(0) (n), fault)``.
        """
        out, fault = self.step(acc, gyr)
        n = self.n_links
        M = self.n_modes_total
        q = out[3 + n + M :]
        return (
            out[0:3],
            out[3 : 3 + n],
            q[3 * n : 4 * n],
            out[3 + n : 3 + n + M],
            q[0:n],
            q[n : 2 * n],
            q[2 * n : 3 * n],
            fault,
        )
