"""The flexible-arm controller step (`flexlearn.runtime.arm_controller.ArmController.forward`) as one branch-free
tensor graph, for `torch.export` and ExecuTorch.

`ArmController` is written for TorchScript: its hot path reads the estimator output with ``.tolist()``, does
the control law on Python floats and returns early on faults. `torch.export` cannot trace that: the first
``float(tensor)`` of the IMU estimator (``flexlearn/physics/modal/estimator.py``, the saturation test of
``FlexibleArmEstimator.step``) and ``math.isfinite(t)`` in ``ArmController._check`` stop it with
``GuardOnDataDependentSymNode`` (see `flexlearn.runtime.executorch_export.diagnose_export`). This module
restructures the same step, built from an existing controller (same constants, same initial state):

* every Python-float or Python-bool state of the controller and its estimator is a buffer (``lp``, ``lp_init``,
  ``tau2_last``, ``cal_pending``, and the estimator's ``initialized`` …), mutated in place;
* every early return and ``if`` on data is computed on both sides and selected with ``torch.where`` (a NaN
  frame computes NaNs that are never selected); the state is written only where the original writes it;
* the scalar control law runs on 0-d float64 tensors in the original's operation order.

Input: ``frame (S, 6)`` float64 [acc m/s² | gyr rad/s], ``t ()`` float64 [s], ``lost ()`` bool (the caller's
shape check: a frame of the wrong shape is passed as zeros with ``lost=True``, fault 1). Output as
`ArmController.forward`: ``(torque (2,) [N m], state (17 + M,), fault code () int64)``. Only ``forward`` is
covered (not ``step_joints``, ``desired`` or ``reset``). Variants and switches are those of the source controller.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor, nn

from flexlearn.runtime.arm_controller import ArmController

_ESTIMATOR_CONSTANTS = ("acc_map", "gyr_map", "psi_map", "offset", "rate_map", "lengths", "lever_t", "sign2",
                        "rot90", "link_of_imu", "ref_index", "own_el", "tip_el", "after_t")
_ESTIMATOR_STATE = ("psi_hat", "bias_hat", "initialized", "last_out", "trig", "alpha", "w_prev", "frame_link")
_CONTROLLER_STATE = ("last_tau", "last_state", "fault_count", "steps", "cal", "gyr_count")
_FLOATS = ("t0", "duration", "a11", "a12", "a22", "gA1", "gB1", "kA1", "kB1", "gB2", "kB2", "th00", "th01", "kp1",
           "kp2", "kd1", "kd2", "tmax1", "tmax2", "dt", "EI1", "EI2", "ff1", "ff2", "ff21", "L1", "lp_beta", "c11",
           "c12", "c21", "c22", "cal_gate")


class ArmControllerGraph(nn.Module):
    """`ArmController.forward` as a branch-free graph with all state in buffers (module docstring).

    Built from ``controller`` in its current state (usually freshly built or reset); the source is not changed.
    """

    def __init__(self, controller: ArmController) -> None:
        super().__init__()
        est = controller.estimator
        self.n_imus = int(controller.n_imus)
        self.n_links = int(est.n_links)
        self.n_modes_total = int(controller.n_modes_total)
        self.state_size = int(controller.state_size)
        for name in _ESTIMATOR_CONSTANTS + _ESTIMATOR_STATE:
            self.register_buffer(name, getattr(est, name).detach().clone())
        for name in _CONTROLLER_STATE + ("state_index", "trig_off", "trig_map"):
            self.register_buffer(name, getattr(controller, name).detach().clone())
        self.register_buffer("load_coup", controller.loads.coup.detach().clone())
        self.register_buffer("load_cols", controller.loads.cols.detach().clone())
        f64 = torch.float64
        self.register_buffer("lp", torch.tensor(controller.lp, dtype=f64))                 # load low-pass (4,)
        self.register_buffer("lp_init", torch.tensor(bool(controller.lp_init)))
        self.register_buffer("tau2_last", torch.tensor(float(controller.tau2_last), dtype=f64))
        self.register_buffer("cal_pending", torch.tensor(bool(controller.cal_pending)))
        self.acc_range, self.gyr_range = float(est.acc_range), float(est.gyr_range)
        self.k_p_dt, self.k_i_dt, self.est_dt = float(est.k_p_dt), float(est.k_i_dt), float(est.dt)
        self.inv_dt, self.beta_alpha = float(est.inv_dt), float(est.beta_alpha)
        self.compensate, self.elastic = bool(est.compensate), bool(est.elastic)
        self.slope_correction, self.use_load = bool(controller.slope_correction), bool(controller.use_load)
        for name in _FLOATS:
            setattr(self, name, float(getattr(controller, name)))
        self.d0 = float(controller.thf0 - controller.th00)
        self.d1 = float(controller.thf1 - controller.th01)

    # ------------------------------------------------------------------------------------------ estimator
    def _estimate(self, acc: Tensor, gyr: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """`FlexibleArmEstimator.step` of a frame taken as valid: new (out, frame_link, ψ̂, b̂, trig, α, w_prev)."""
        S, n, M = self.n_imus, self.n_links, self.n_modes_total
        v = torch.addmv(torch.mv(self.acc_map, acc.reshape(-1)), self.gyr_map, gyr.reshape(-1))
        w = v[2 * S:]
        fy = v[:S]
        fz = v[S:2 * S]
        init = self.initialized
        psi0 = torch.where(init, self.psi_hat, torch.atan2(fy, fz))
        trig0 = torch.where(init, self.trig, torch.sin(torch.addmv(self.offset, self.psi_map, psi0)[1 + 4 * n + M:]))
        w_prev = torch.where(init, self.w_prev, w)
        alpha = self.alpha
        if self.compensate:
            alpha = torch.add(alpha, (w - w_prev) * self.inv_dt - alpha, alpha=self.beta_alpha)
            w_prev = w
            wl = w[self.ref_index]
            cs = trig0.view(2, n)
            nrm = self.sign2 * cs.flip(0)
            aw = nrm * alpha[self.ref_index] - cs * (wl * wl)
            a = torch.mm(aw, self.lever_t)
            if self.elastic:
                a = a + torch.mm(nrm * torch.mv(self.tip_el, alpha), self.after_t)
            ci = cs[:, self.link_of_imu]
            fy = fy - (ci * a).sum(0)
            fz = fz - (self.sign2 * ci.flip(0) * a).sum(0)
            if self.elastic:
                fz = fz - torch.mv(self.own_el, alpha)
        psi_m = torch.atan2(fy, fz)
        e = psi_m - psi0
        psi = torch.add(torch.add(torch.add(psi0, self.bias_hat, alpha=self.est_dt), e, alpha=self.k_p_dt), w,
                        alpha=self.est_dt)
        bias = torch.add(self.bias_hat, e, alpha=self.k_i_dt)
        y = torch.addmv(self.offset, self.psi_map, psi)
        trig = torch.sin(y[1 + 4 * n + M:])
        rate = torch.mv(self.rate_map, w + bias)
        cs2 = trig.view(2, n)
        pos = torch.mv(cs2, self.lengths) + torch.mv(self.rot90, torch.mv(cs2, y[1 + n + M:1 + 2 * n + M]))
        out = torch.cat([pos, y[:1 + 4 * n + M], rate])
        return out, v, psi, bias, trig, alpha, w_prev

    # ------------------------------------------------------------------------------------------ controller
    def _calibration(self, go: Tensor, t: Tensor, fl: Tensor, psi: Tensor, bias: Tensor
                     ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """Gyro rest calibration (``_calibrate_gyros`` before t0, ``_apply_gyro_calibration`` at t0), masked:
        new (cal (6, S), gyr_count, b̂, cal_pending)."""
        S = self.n_imus
        c = self.cal
        pending = go & self.cal_pending
        before = t < self.t0
        do_cal = pending & before
        do_apply = pending & ~before
        c5 = torch.add(c[5], fl[2 * S:], alpha=self.dt)
        psi_m = torch.atan2(fl[:S], fl[S:2 * S])
        r = c5 - psi_m
        m = ((psi_m - psi).abs() < self.cal_gate).to(torch.float64)
        mr = m * r
        new = torch.stack([c[0] + m, c[1] + m * t, c[2] + m * (t * t), c[3] + mr, c[4] + mr * t, c5])
        cal = torch.where(do_cal, new, c)
        count = torch.where(do_cal, self.gyr_count + 1, self.gyr_count)
        den = c[0] * c[2] - c[1] * c[1]
        ok = (c[0] >= 200.0) & (den > 0.0)
        beta = (c[4] * c[0] - c[3] * c[1]) / torch.where(ok, den, torch.ones_like(den))
        bias = torch.where(do_apply & ok, -beta, bias)
        return cal, count, bias, self.cal_pending & ~do_apply

    def _loads(self, out: Tensor, fl: Tensor, psi: Tensor) -> Tuple[Tensor, Tensor]:
        """``ArmController._loads``: (low-passed hub loads (2,) [N m], new low-pass state (4,))."""
        S, M = self.n_imus, self.n_modes_total
        trig = torch.sin(torch.addmv(self.trig_off, self.trig_map, psi)).view(2, 2, S)
        fr = (trig * fl[:2 * S].view(2, S).unsqueeze(0)).sum(1)
        Y = torch.mm(torch.cat([fr, (fr[1] * torch.mv(self.load_coup, out[5:5 + M])).unsqueeze(0)]), self.load_cols)
        lf0, lf1, lf2, lf3 = Y[0, 0] - Y[2, 4], Y[0, 1] - Y[2, 5], Y[1, 3], Y[0, 3]
        rot = out[4] + out[7 + M]
        cr, sr = torch.cos(rot), torch.sin(rot)
        fa2, fn2 = cr * lf2 - sr * lf3, sr * lf2 + cr * lf3
        raw = torch.stack([lf0 + self.L1 * fn2 - out[5 + M] * fa2 + self.tau2_last, lf1])
        lp = torch.where(self.lp_init, self.lp, torch.cat([raw, raw]))
        a = lp[:2] + self.lp_beta * (raw - lp[:2])
        y = lp[2:] + self.lp_beta * (a - lp[2:])
        return y, torch.cat([a, y])

    def _law(self, out: Tensor, t: Tensor, load: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """Seed 000 eq. (45) in the source's variant on 0-d tensors: (τ₁, τ₂, state (17 + M,), finite)."""
        M = self.n_modes_total
        th1, th2 = out[3], out[4]
        r1, r2 = out[11 + M], out[12 + M]
        w1, w2 = out[5 + M], out[6 + M]
        if self.slope_correction:
            cp1 = torch.cos(th1)
            cp2 = torch.cos(th1 + out[7 + M] + th2)
            th1, th2 = th1 + self.c11 * cp1 + self.c12 * cp2, th2 + self.c21 * cp1 + self.c22 * cp2
        if self.use_load:
            m1, m2 = -load[0], -load[1]
        else:
            m1, m2 = self.EI1 * out[9 + M], self.EI2 * out[10 + M]
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
        H1 = (self.a11 * m1 + self.a12 * m2 - self.gA1 * c1 - self.gB1 * c12 + self.kA1 * w1 * s1
              + self.kB1 * w2 * s12 - self.ff1 * d[4])
        H2 = self.a22 * m2 - self.gB2 * c12 + self.kB2 * w2 * s12 - self.ff2 * d[5] - self.ff21 * d[4]
        t1 = self.kp1 * (d[0] - th1) + self.kd1 * (d[2] - r1) - H1
        t2 = self.kp2 * (d[1] - th2) + self.kd2 * (d[3] - r2) - H2
        finite = torch.isfinite(t1) & torch.isfinite(t2) & torch.isfinite(th1 + th2 + r1 + r2)
        st = out[self.state_index]
        head = torch.stack([th1, th2]) if self.slope_correction else st[0:2]
        state = torch.cat([head, st[2:13 + M], torch.stack([d[0], d[1], load[0], load[1]])])
        return t1, t2, state, finite

    def forward(self, frame: Tensor, t: Tensor, lost: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One step (see the module docstring): frame (S, 6) f64, t () f64 [s], lost () bool → (τ, state, fault)."""
        i64 = torch.int64
        self.steps.add_(1)
        code0 = torch.where(lost, 1, torch.where(torch.isfinite(t), 0, 32)).to(i64)
        acc = frame[:, :3]
        gyr = frame[:, 3:]
        est_ok = ((torch.linalg.vector_norm(acc, float("inf")) < self.acc_range)
                  & (torch.linalg.vector_norm(gyr, float("inf")) < self.gyr_range))
        go = (code0 == 0) & est_ok
        out, fl, psi, bias, trig, alpha, w_prev = self._estimate(acc, gyr)
        cal, count, bias, pending = self._calibration(go, t, fl, psi, bias)
        load, lp = self._loads(out, fl, psi)
        t1, t2, state, finite = self._law(out, t, load)
        over = (t1.abs() > self.tmax1) | (t2.abs() > self.tmax2)
        t1 = torch.clamp(t1, -self.tmax1, self.tmax1)
        t2 = torch.clamp(t2, -self.tmax2, self.tmax2)
        tau = torch.stack([t1, t2])
        valid = go & finite
        # state writes where the source writes them
        for name, new in (("last_out", out), ("frame_link", fl), ("psi_hat", psi), ("trig", trig),
                          ("alpha", alpha), ("w_prev", w_prev), ("cal", cal), ("gyr_count", count), ("lp", lp)):
            buf = getattr(self, name)
            buf.copy_(torch.where(go, new, buf))
        self.bias_hat.copy_(torch.where(go, bias, self.bias_hat))
        self.initialized.copy_(self.initialized | go)
        self.lp_init.copy_(self.lp_init | go)
        self.cal_pending.copy_(pending)
        tau_out = torch.where(valid, tau, self.last_tau)
        state_out = torch.where(valid, state, self.last_state)
        self.last_tau.copy_(tau_out)
        self.last_state.copy_(state_out)
        self.tau2_last.copy_(torch.where(valid, t2, self.tau2_last))
        classify = torch.where(torch.isfinite(frame).all(), 4, 2).to(i64)
        code = torch.where(code0 != 0, code0, torch.where(~est_ok, classify, torch.where(
            ~finite, 16, torch.where(over, 8, 0)).to(i64)))
        self.fault_count.add_((code != 0).to(i64))
        return tau_out.clone(), state_out.clone(), code
