"""The flexible-arm controller step (`flexlearn.runtime.arm.controller.ArmController.forward`) as one branch-free
tensor graph, for `torch.export` and ExecuTorch.

`ArmController` is written for TorchScript: its hot path reads the estimator output with ``.tolist()``, does
the control law on Python floats and returns early on faults. `torch.export` cannot trace that: the first
``float(tensor)`` of the IMU estimator (``flexlearn/physics/modal/estimator.py``, the saturation test of
``FlexibleArmEstimator.step``) and ``math.isfinite(t)`` in ``ArmController._check`` stop it with
``GuardOnDataDependentSymNode`` (see `flexlearn.runtime.export_diagnosis.diagnose_export`). This module
restructures the same step, built from an existing controller (same constants, same initial state):

* every Python-float or Python-bool state of the controller and its estimator is a buffer (``lp``, ``lp_init``,
  ``tau2_last``, ``cal_pending``, and the estimator's ``initialized`` …), mutated in place;
* every early return and ``if`` on data is computed on both sides and selected with ``torch.where`` (a NaN
  frame computes NaNs that are never selected); the state is written only where the original writes it;
* the folded estimator (`flexlearn.runtime.arm.step`: the same matrices, the same kernels in the same order) and
  the scalar control law on 0-d float64 tensors in the original's operation order, so that the outputs are equal
  bit for bit.

Input: ``frame (S, 6)`` float64 [acc m/s² | gyr rad/s], ``t ()`` float64 [s], ``lost ()`` bool (the caller's
shape check: a frame of the wrong shape is passed as zeros with ``lost=True``, fault 1). Output as
`ArmController.forward`: ``(torque (2,) [N m], state (17 + M,), fault code () int64)``. Only ``forward`` is
covered (not ``step_joints``, ``desired`` or ``reset``). Variants and switches are those of the source controller.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor, nn

from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.outputs import (
    FAULT_BAD_TIME,
    FAULT_BAD_TORQUE,
    FAULT_LOST_FRAME,
    FAULT_NONFINITE,
    FAULT_SATURATED,
    FAULT_TORQUE_LIMIT,
)
from flexlearn.runtime.arm.step import (
    STEP_FLOATS,
    STEP_INTS,
    STEP_MAPS,
    STEP_STATE,
    compensation_map,
    gyro_bias_from_rest,
    initial_link_trig,
    rest_sample,
)


class ArmControllerGraph(nn.Module):
    """`ArmController.forward` as a branch-free graph with all state in buffers (module docstring).

    Built from ``controller`` in its current state (usually freshly built or reset); the source is not changed.
    """

    # buffers: the lean step's maps (`STEP_MAPS`), the controller's (`STEP_STATE`) and the estimator's state
    A: Tensor
    a0: Tensor
    Q: Tensor
    KK: Tensor
    W: Tensor
    init_off: Tensor
    init_map: Tensor
    ranges: Tensor
    last_tau: Tensor
    last_state: Tensor
    cal: Tensor
    gyr_count: Tensor
    filter_state: Tensor
    trig: Tensor
    initialized: Tensor
    fault_count: Tensor
    steps: Tensor
    lp: Tensor
    lp_init: Tensor
    tau2_last: Tensor
    cal_pending: Tensor
    # settings copied from the controller (`STEP_INTS`, `STEP_FLOATS`)
    n_imus: int
    n_modes_total: int
    state_size: int
    k_u: int
    k_u2: int
    k_z: int
    k_fl: int
    k_lin: int
    k_e: int
    k_sin: int
    t0: float
    duration: float
    a11: float
    a12: float
    a22: float
    gA1: float
    gB1: float
    kA1: float
    kB1: float
    gB2: float
    kB2: float
    th00: float
    th01: float
    kp1: float
    kp2: float
    kd1: float
    kd2: float
    tmax1: float
    tmax2: float
    dt: float
    EI1: float
    EI2: float
    ff1: float
    ff2: float
    ff21: float
    L1: float
    L2: float
    lp_beta: float
    c11: float
    c12: float
    c21: float
    c22: float
    cal_gate: float
    d0: float
    d1: float
    compensate: bool
    slope_correction: bool
    use_load: bool

    def __init__(self, controller: ArmController) -> None:
        super().__init__()
        est = controller.estimator
        for name in STEP_INTS:
            setattr(self, name, int(getattr(controller, name)))
        for name in STEP_MAPS + STEP_STATE:
            self.register_buffer(name, getattr(controller, name).detach().clone())
        for name in ("filter_state", "trig", "initialized"):
            self.register_buffer(name, getattr(est, name).detach().clone())
        f64, i64 = torch.float64, torch.int64
        self.register_buffer("fault_count", torch.tensor(int(controller.fault_count), dtype=i64))
        self.register_buffer("steps", torch.tensor(int(controller.steps), dtype=i64))
        self.register_buffer("lp", torch.tensor(controller.lp, dtype=f64))  # load low-pass (4,)
        self.register_buffer("lp_init", torch.tensor(bool(controller.lp_init)))
        self.register_buffer("tau2_last", torch.tensor(float(controller.tau2_last), dtype=f64))
        self.register_buffer("cal_pending", torch.tensor(bool(controller.cal_pending)))
        self.compensate = bool(controller.compensate)
        self.slope_correction, self.use_load = bool(controller.slope_correction), bool(controller.use_load)
        for name in STEP_FLOATS:
            setattr(self, name, float(getattr(controller, name)))
        self.d0 = float(controller.thf0 - controller.th00)
        self.d1 = float(controller.thf1 - controller.th01)

    # ------------------------------------------------------------------------------------------ estimator
    def _estimate(self, scaled: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """`ArmController._estimate` of a frame taken as valid, given over the sensor ranges (S, 6) (`arm.step`)
        : (L, z′, Y, sines)."""
        S, n = self.n_imus, 2
        x = scaled.reshape(-1)
        z = self.filter_state
        L0 = torch.addmv(self.a0, self.A, torch.cat([x, z]))
        fl0 = L0[self.k_fl :]
        psi0 = torch.atan2(fl0[:S], fl0[S : 2 * S])
        init = self.initialized
        z0 = torch.where(init, z, torch.cat([psi0, z[S : 3 * S], L0[self.k_z + 3 * S : self.k_z + 4 * S]]))
        trig0 = torch.where(init, self.trig, initial_link_trig(self.init_off, self.init_map, psi0))
        L = torch.addmv(self.a0, self.A, torch.cat([x, z0]))
        f = L[: self.k_u]
        if self.compensate:
            T = compensation_map(self.Q, trig0, S, n)
            f = torch.addmv(f, T, L[self.k_u : self.k_u2] * L[self.k_u2 : self.k_z])
        zY = torch.addmv(L[self.k_z : self.k_fl], self.KK, torch.atan2(f[:S], f[S:]))
        Y = zY[4 * S :]
        return L, zY[: 4 * S], Y, torch.sin(Y[self.k_sin :])

    # ------------------------------------------------------------------------------------------ controller
    def _calibration(
        self, go: Tensor, t: Tensor, fl: Tensor, w: Tensor, psi: Tensor, bias: Tensor
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """Gyro rest calibration (``_calibrate_gyros`` before t0, ``_apply_gyro_calibration`` at t0), masked:
        new (cal (6, S), gyr_count, b̂, cal_pending)."""
        pending = go & self.cal_pending
        before = t < self.t0
        do_cal = pending & before
        do_apply = pending & ~before
        c = self.cal
        sample = rest_sample(c[5], fl, w, psi, self.dt, self.cal_gate)
        m, mr = sample.mask, sample.residual
        new = torch.stack([c[0] + m, c[1] + m * t, c[2] + m * (t * t), c[3] + mr, c[4] + mr * t, sample.integral])
        cal = torch.where(do_cal, new, self.cal)
        count = torch.where(do_cal, self.gyr_count + 1, self.gyr_count)
        fitted, ok = gyro_bias_from_rest(self.cal)
        bias = torch.where(do_apply & ok, fitted, bias)
        return cal, count, bias, self.cal_pending & ~do_apply

    def _loads(self, lf: Tensor, Y: Tensor) -> Tuple[Tensor, Tensor]:
        """``ArmController._loads`` from lf = [Λ₁, Λ₂, F_a2, F_n2]: (low-passed hub loads (2,) [N m], low-pass (4,))."""
        M = self.n_modes_total
        rot = Y[2] + Y[5 + M]
        cr, sr = torch.cos(rot), torch.sin(rot)
        fa2, fn2 = cr * lf[2] - sr * lf[3], sr * lf[2] + cr * lf[3]
        raw = torch.stack([lf[0] + self.L1 * fn2 - Y[3 + M] * fa2 + self.tau2_last, lf[1]])
        lp = torch.where(self.lp_init, self.lp, torch.cat([raw, raw]))
        a = lp[:2] + self.lp_beta * (raw - lp[:2])
        y = lp[2:] + self.lp_beta * (a - lp[2:])
        return y, torch.cat([a, y])

    def _law(self, Y: Tensor, cs: Tensor, t: Tensor, load: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """Seed 000 eq. (45) in the source's variant on 0-d tensors: (τ₁, τ₂, state (17 + M,), finite)."""
        M = self.n_modes_total
        th1, th2 = Y[1], Y[2]
        r1, r2 = Y[self.k_lin], Y[self.k_lin + 1]
        w1, w2 = Y[3 + M], Y[4 + M]
        if self.slope_correction:
            cp1 = torch.cos(th1)
            cp2 = torch.cos(th1 + Y[5 + M] + th2)
            th1, th2 = th1 + self.c11 * cp1 + self.c12 * cp2, th2 + self.c21 * cp1 + self.c22 * cp2
        if self.use_load:
            m1, m2 = -load[0], -load[1]
        else:
            m1, m2 = self.EI1 * Y[7 + M], self.EI2 * Y[8 + M]
        T = self.duration
        sig = torch.clamp((t - self.t0) / T, 0.0, 1.0)
        s2 = sig * sig
        s3 = s2 * sig
        p = 10.0 * s3 - 15.0 * s3 * sig + 6.0 * s3 * s2
        v = (30.0 * s2 - 60.0 * s3 + 30.0 * s2 * s2) / T
        a = (60.0 * sig - 180.0 * s2 + 120.0 * s3) / (T * T)
        d = [self.th00 + self.d0 * p, self.th01 + self.d1 * p, self.d0 * v, self.d1 * v, self.d0 * a, self.d1 * a]
        a12 = th1 + th2
        c1, s1 = torch.cos(th1), torch.sin(th1)
        c12, s12 = torch.cos(a12), torch.sin(a12)
        H1 = (
            self.a11 * m1
            + self.a12 * m2
            - self.gA1 * c1
            - self.gB1 * c12
            + self.kA1 * w1 * s1
            + self.kB1 * w2 * s12
            - self.ff1 * d[4]
        )
        H2 = self.a22 * m2 - self.gB2 * c12 + self.kB2 * w2 * s12 - self.ff2 * d[5] - self.ff21 * d[4]
        t1 = self.kp1 * (d[0] - th1) + self.kd1 * (d[2] - r1) - H1
        t2 = self.kp2 * (d[1] - th2) + self.kd2 * (d[3] - r2) - H2
        finite = torch.isfinite(t1) & torch.isfinite(t2) & torch.isfinite(th1 + th2 + r1 + r2)
        c1_, c2_, s1_, s2_ = cs[0], cs[1], cs[2], cs[3]
        px = (c1_ * self.L1 + c2_ * self.L2) - (s1_ * w1 + s2_ * w2)
        py = (s1_ * self.L1 + s2_ * self.L2) + (c1_ * w1 + c2_ * w2)
        state = torch.cat(
            [
                torch.stack([th1, th2, r1, r2]),
                Y[3 : self.k_lin],
                torch.stack([px, py, Y[0], d[0], d[1], load[0], load[1]]),
            ]
        )
        return t1, t2, state, finite

    def forward(self, frame: Tensor, t: Tensor, lost: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One step (see the module docstring): frame (S, 6) f64, t () f64 [s], lost () bool → (τ, state, fault).

        Args:
            frame: (S, 6) float64 = [acc (3) m/s² | gyr (3) rad/s] per IMU.
            t: time () float64 [s].
            lost: () bool, True when the frame was lost (fault 1).

        Returns:
            ``(torque (2,) [N m], state (17 + M,), fault code () int64)``.
        """
        i64 = torch.int64
        S = self.n_imus
        self.steps.add_(1)
        code0 = torch.where(lost, FAULT_LOST_FRAME, torch.where(torch.isfinite(t), 0, FAULT_BAD_TIME)).to(i64)
        scaled = frame / self.ranges
        est_ok = torch.linalg.vector_norm(scaled, float("inf")) < 1.0
        go = (code0 == 0) & est_ok
        L, z, Y, sines = self._estimate(scaled)
        fl = L[self.k_fl :]
        cal, count, bias, pending = self._calibration(
            go, t, fl, L[self.k_z + 3 * S : self.k_z + 4 * S], z[:S], z[S : 2 * S]
        )
        lf = torch.mv(self.W, sines[4:] * fl * Y[self.k_e : self.k_sin])
        load, lp = self._loads(lf, Y)
        t1, t2, state, finite = self._law(Y, sines[:4], t, load)
        over = (t1.abs() > self.tmax1) | (t2.abs() > self.tmax2)
        t1 = torch.clamp(t1, -self.tmax1, self.tmax1)
        t2 = torch.clamp(t2, -self.tmax2, self.tmax2)
        tau = torch.stack([t1, t2])
        valid = go & finite
        # state writes where the source writes them
        z_new = torch.cat([z[:S], bias, z[2 * S :]])
        for name, new in (("filter_state", z_new), ("trig", sines[:4]), ("cal", cal), ("gyr_count", count), ("lp", lp)):
            buf = getattr(self, name)
            buf.copy_(torch.where(go, new, buf))
        self.initialized.copy_(self.initialized | go)
        self.lp_init.copy_(self.lp_init | go)
        self.cal_pending.copy_(pending)
        tau_out = torch.where(valid, tau, self.last_tau)
        state_out = torch.where(valid, state, self.last_state)
        self.last_tau.copy_(tau_out)
        self.last_state.copy_(state_out)
        self.tau2_last.copy_(torch.where(valid, t2, self.tau2_last))
        classify = torch.where(torch.isfinite(frame).all(), FAULT_SATURATED, FAULT_NONFINITE).to(i64)
        code = torch.where(
            code0 != 0,
            code0,
            torch.where(
                ~est_ok,
                classify,
                torch.where(~finite, FAULT_BAD_TORQUE, torch.where(over, FAULT_TORQUE_LIMIT, 0)).to(i64),
            ),
        )
        self.fault_count.add_((code != 0).to(i64))
        return tau_out.clone(), state_out.clone(), code
