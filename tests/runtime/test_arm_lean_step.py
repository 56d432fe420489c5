"""The lean controller step (folded estimator, `flexlearn.runtime.arm.step`) against a readable reference: the
estimator's own step (`FlexibleArmEstimator.step`), the load model's `forward`, `quintic` and eq. (45) written out,
over the fault-laden frame stream (lost frames, NaN/inf, saturation, NaN times, torque limits, gyro calibration)."""

from __future__ import annotations

import math
from typing import List

import pytest
import torch

from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController, quintic
from flexlearn.runtime.arm.step import exact_f64
from flexlearn.sim.arm_fault_stream import arm_fault_stream as arm_stream

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


class ReadableController:
    """Eq. (45) step by step from the readable parts (the reference the lean step is folded from)."""

    def __init__(self, cfg: ArmControllerConfig, lean: ArmController) -> None:
        self.cfg, self.c = cfg, lean  # the lean controller only lends its build-time constants
        self.est = cfg.build_estimator()
        self.last_tau, self.last_state = lean.last_tau.clone(), lean.last_state.clone()
        self.tau2, self.lp, self.cal = float(self.last_tau[1]), None, torch.zeros(6, 5, dtype=F64)
        self.pending = cfg.gyro_rest_calibration

    def _hold(self, code):
        return self.last_tau.clone(), self.last_state.clone(), code

    def _calibrate(self, t, psi):
        fl, c = self.est.frame_link, self.cal
        c[5] += fl[10:] * self.cfg.dt
        psi_m = torch.atan2(fl[:5], fl[5:10])
        m = ((psi_m - psi).abs() < 0.05).to(F64)
        r = c[5] - psi_m
        c[:5] += torch.stack([m, m * t, m * t * t, m * r, m * r * t])

    def _apply_calibration(self):
        c = self.cal
        den = c[0] * c[2] - c[1] * c[1]
        ok = (c[0] >= 200.0) & (den > 0.0)
        beta = (c[4] * c[0] - c[3] * c[1]) / torch.where(ok, den, torch.ones_like(den))
        self.est.bias_hat.copy_(torch.where(ok, -beta, self.est.bias_hat))
        self.pending = False

    def step(self, fr, t):
        c, M = self.c, 3
        if fr.dim() != 2 or fr.shape != (5, 6):
            return self._hold(1)
        if not math.isfinite(t):
            return self._hold(32)
        out, fault = self.est.step(fr[:, :3], fr[:, 3:])
        if bool(fault):
            return self._hold(4 if bool(torch.isfinite(fr).all()) else 2)
        if self.pending:
            self._calibrate(t, self.est.psi_hat) if t < c.t0 else self._apply_calibration()
        o = out.tolist()  # [pose (3), θ (2), η (M), w(L), w′(L), w″(0), θ̇]
        delta = c.trig_map[:5] @ self.est.psi_hat  # local slopes ψ̂_s − φ_link(s)
        mom, forces = c.loads(self.est.frame_link[:10].view(2, 5), delta, out[5 : 5 + M])
        rot = o[4] + o[7 + M]
        fa2 = math.cos(rot) * float(forces[0, 1]) - math.sin(rot) * float(forces[1, 1])
        fn2 = math.sin(rot) * float(forces[0, 1]) + math.cos(rot) * float(forces[1, 1])
        raw = [float(mom[0]) + c.L1 * fn2 - o[5 + M] * fa2 + self.tau2, float(mom[1])]
        self.lp = raw + raw if self.lp is None else self.lp
        for j in range(2):
            self.lp[j] += c.lp_beta * (raw[j] - self.lp[j])
            self.lp[2 + j] += c.lp_beta * (self.lp[j] - self.lp[2 + j])
        load = self.lp[2:]
        th1, th2, r1, r2 = o[3], o[4], o[11 + M], o[12 + M]
        if self.cfg.slope_correction:
            cp1, cp2 = math.cos(th1), math.cos(th1 + o[7 + M] + th2)
            th1, th2 = th1 + c.c11 * cp1 + c.c12 * cp2, th2 + c.c21 * cp1 + c.c22 * cp2
        m1, m2 = (-load[0], -load[1]) if c.use_load else (c.EI1 * o[9 + M], c.EI2 * o[10 + M])
        thd, vd, ad = (
            v.tolist()
            for v in quintic(
                torch.tensor(t, dtype=F64),
                torch.tensor(self.cfg.theta0, dtype=F64),
                torch.tensor(self.cfg.thetaf, dtype=F64),
                c.t0,
                c.duration,
            )
        )
        w1, w2 = o[5 + M], o[6 + M]
        H1 = (
            c.a11 * m1
            + c.a12 * m2
            - c.gA1 * math.cos(th1)
            - c.gB1 * math.cos(th1 + th2)
            + c.kA1 * w1 * math.sin(th1)
            + c.kB1 * w2 * math.sin(th1 + th2)
            - c.ff1 * ad[0]
        )
        H2 = (
            c.a22 * m2 - c.gB2 * math.cos(th1 + th2) + c.kB2 * w2 * math.sin(th1 + th2) - c.ff2 * ad[1] - c.ff21 * ad[0]
        )
        t1 = c.kp1 * (thd[0] - th1) + c.kd1 * (vd[0] - r1) - H1
        t2 = c.kp2 * (thd[1] - th2) + c.kd2 * (vd[1] - r2) - H2
        code = 8 if abs(t1) > c.tmax1 or abs(t2) > c.tmax2 else 0
        t1, t2 = min(max(t1, -c.tmax1), c.tmax1), min(max(t2, -c.tmax2), c.tmax2)
        self.last_tau = torch.tensor([t1, t2], dtype=F64)
        self.last_state = torch.tensor([th1, th2, r1, r2] + o[5 : 11 + M] + o[0:3] + thd + load, dtype=F64)
        self.tau2 = t2
        return self.last_tau.clone(), self.last_state.clone(), code


@pytest.mark.parametrize("kw", [{}, {"tau_max": (3250.0, 640.0)}, {"variant": "seed", "compensate": False}])
def test_lean_step_equals_the_readable_reference(kw):
    """Same torques and states to 1e-9 (absolute; torques are ~1e3 N m) and the same fault codes on every step."""
    cfg = ArmControllerConfig(**kw)
    lean = torch.jit.script(ArmController.build(cfg))
    ref = ReadableController(cfg, ArmController.build(cfg))
    worst, codes = 0.0, set()
    for fr, t in arm_stream():
        a, b = lean(fr, t), ref.step(fr, t)
        assert int(a[2]) == b[2]
        codes.add(b[2])
        worst = max(worst, float((a[0] - b[0]).abs().max()), float((a[1] - b[1]).abs().max()))
    assert worst < 1e-9, worst
    assert codes >= {0, 1, 2, 4, 32}


def _tensor_of_list(v: List[float]) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float64)


def test_exact_f64_is_exact_where_torch_tensor_rounds():
    """``exact_f64`` (scripted) returns every float64 bit for bit over the whole range (1e-300 … 1e300, the largest
    and smallest normal numbers, subnormals), non-finite values included, also into ``out``."""
    import struct

    f = torch.jit.script(exact_f64)
    g = torch.Generator().manual_seed(0)
    vals = (
        (torch.rand(2000, generator=g, dtype=F64) - 0.5)
        * 10.0 ** (torch.rand(2000, generator=g, dtype=F64) * 600 - 300)
    ).tolist()
    vals += [0.0, -1.5, 1e-3, -2.2250738585072014e-308]  # normal numbers: the bit-pattern path
    for v in (vals, [1.7976931348623157e308, -1.0], vals + [5e-324, -3e-320]):  # largest; subnormals: per value
        assert [struct.pack("<d", x) for x in f(v).tolist()] == [struct.pack("<d", x) for x in v]
    out = torch.zeros(3, dtype=F64)
    assert f([1e-310, -2.5, 7.0], out) is out and out.tolist() == [1e-310, -2.5, 7.0]
    assert torch.jit.script(_tensor_of_list)([0.1]).item() != 0.1  # the reason: float32 on the way
    got = f([1.0, math.inf, math.nan]).tolist()
    assert got[:2] == [1.0, math.inf] and math.isnan(got[2])


def test_estimator_state_views_follow_the_lean_step():
    """The estimator's ψ̂, b̂, α, ω_prev, trig are the buffers the lean step writes (views), so that setting or
    reading them (tests, tools) acts on the controller's filter; saving keeps the sharing."""
    import io

    c = torch.jit.script(ArmController.build())
    fr = torch.zeros(5, 6, dtype=F64)
    fr[:, 2] = 9.80665
    c(fr, 0.0)
    buf = io.BytesIO()
    torch.jit.save(c, buf)
    buf.seek(0)
    m = torch.jit.load(buf)
    for mod in (c, m):
        est = mod.estimator
        assert torch.equal(est.filter_state[:5], est.psi_hat) and torch.equal(mod.sines[:4], est.trig)
        est.psi_hat.fill_(0.25)
        assert float(mod.work[30:35].min()) == 0.25
