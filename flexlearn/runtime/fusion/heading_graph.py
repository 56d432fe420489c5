"""The heading-drift filter of the fused estimator's export twin (`flexlearn.runtime.fusion.graph`), branch-free.

A mixin of `FusedEstimatorGraph`: `HeadingDriftFilter` (`flexlearn.runtime.fusion.heading_filter`, which documents
the model) on buffers prefixed ``hf_``, and the heading-rate correction of a magnetic fix
(`bias_models.HeadingRateBias.correct`), each applied only where a 0-d bool condition holds (``torch.where``; no
data-dependent control flow, for `torch.export`). State ``x = [θ_1..θ_N [rad], ρ_1..ρ_N [rad/rad], δ_1..δ_N (3
each) [rad]]`` (5N,) with covariance P (5N, 5N); a fix of joint j + 1 is the scalar update with ``h = e_{j+1} − e_j
+ w`` on δ_j, ``S = hᵀPh + r``, ``r = σ_m² / s²``, ``K = Ph / S``, gated at ``y² / S > hf_gate2`` unless the joint's
previous fix was rejected too. Time t [s], travel [rad].
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from flexlearn.lie import so3_exp
from flexlearn.runtime.fusion.heading_filter import (
    heading_angle_terms,
    heading_predict,
    heading_prior_variances,
    misalignment_direction,
)
from flexlearn.runtime.fusion.state import EstimatorStateTypes

__all__ = ["HeadingFilterGraph"]

F64 = torch.float64


class HeadingFilterGraph(EstimatorStateTypes):
    """Heading filter and heading-rate correction of `FusedEstimatorGraph` (module docstring); also its masked
    write `put_where`. Uses the graph's buffers and settings, declared here for the type checker."""

    n: int
    p0: float
    sigma_m2: float
    hf_kappa2: float
    hf_sigma_b2: float
    hf_sigma_align2: float
    hf_gate2: float
    hf_x: Tensor
    hf_p: Tensor
    hf_travel_ref: Tensor
    hf_eye: Tensor
    hf_last_nis: Tensor
    hf_rejected: Tensor
    hf_t_ref: Tensor
    ar3: Tensor
    pend_travel: Tensor

    @staticmethod
    def put_where(buf: Tensor, cond: Tensor, value: Tensor) -> None:
        """``buf`` ← ``value`` where ``cond`` (broadcast), in place.

        Args:
            buf: the buffer written.
            cond: bool mask, broadcast to ``buf``.
            value: the new values, broadcast to ``buf``.
        """
        buf.copy_(torch.where(cond, value, buf))

    def reset_heading_filter(self, cond: Optional[Tensor] = None) -> None:
        """`HeadingDriftFilter.reset` where ``cond``.

        Args:
            cond: () bool; None: always.
        """
        n = self.n
        diag = heading_prior_variances(n, self.p0, self.hf_kappa2, self.hf_sigma_align2)
        if cond is None:
            for buf in (self.hf_x, self.hf_travel_ref, self.hf_last_nis, self.hf_rejected):
                buf.zero_()
            self.hf_p.copy_(self.hf_eye * diag)
            self.hf_t_ref.fill_(-1e300)
            return
        self.put_where(self.hf_x, cond, torch.zeros_like(self.hf_x))
        self.put_where(self.hf_p, cond, self.hf_eye * diag)
        for buf in (self.hf_travel_ref, self.hf_last_nis, self.hf_rejected):
            self.put_where(buf, cond, torch.zeros_like(buf))
        self.put_where(self.hf_t_ref, cond, torch.full_like(self.hf_t_ref, -1e300))

    def heading_rate_correction(
        self, j: Tensor, uq: Tensor, um: Tensor, r_par: Tensor, t: Tensor, go: Tensor
    ) -> Tensor:
        """The "heading" bias model's correction (`bias_models.HeadingRateBias`: predict, update, gains) where ``go``.

        Args:
            j: the joint's index () int64 (segment j + 1).
            uq: u^q, the segment's direction from the quaternions (3,).
            um: u^m, its direction from the fix (3,).
            r_par: R̂_{j}, the corrected parent rotation at coil activation (3, 3).
            t: time of the fix () [s].
            go: () bool, whether the fix is attempted.

        Returns:
            () bool, whether the fix was accepted.
        """
        n = self.n
        jv = j.view(1)
        self._hf_predict(self.pend_travel[1:], t, go)
        th0 = self.hf_x[:n]
        dth = th0 - self.theta_applied
        a = self.axis.index_select(0, jv + 1).squeeze(0)
        x = torch.matmul(self.c_bias.index_select(0, jv).squeeze(0), uq)
        y, s2 = heading_angle_terms(x, um, a)
        obs = s2 >= 1e-3
        jp = (j - 1).clamp_min(0).view(1)
        prev = torch.where(j > 0, dth.index_select(0, jp).squeeze(0), torch.zeros_like(s2))
        y = y - dth.index_select(0, jv).squeeze(0) + prev
        w = misalignment_direction(a, um, r_par) / torch.sqrt(s2)
        ok = self._hf_update(j, y, self.sigma_m2 / s2, w, go & obs)
        ok = ok | ~obs
        th = self.hf_x[:n]
        finite = torch.isfinite(th).all()
        self.reset_heading_filter(go & ~finite)
        set_gain = go & finite
        self.put_where(self.theta_applied, set_gain, th)
        self.put_where(self.rel_c, set_gain, th - torch.cat([torch.zeros(1, dtype=F64), th[:-1]]))
        pjj = self.hf_p.index_select(0, jv).index_select(1, jv).reshape(1).expand(n)
        row = self.eye_n.index_select(0, jv).squeeze(0)
        self.put_where(self.p_var, set_gain & row, pjj)
        self.put_where(self.t_p, set_gain & row, t.expand(n))
        wv = th.unsqueeze(-1) * self.axis[1:]
        self.put_where(self.bias, set_gain, wv)
        cb = so3_exp(wv)
        self.put_where(self.c_bias, set_gain, cb)
        self.put_where(self.gain, set_gain, torch.cat([self.gain[:1], torch.matmul(cb, self.tmap[1:])]))
        return ok & finite & go

    def _hf_predict(self, travel: Tensor, t: Tensor, cond: Tensor) -> None:
        """`HeadingDriftFilter.predict` where ``cond``."""
        dphi = (travel - self.hf_travel_ref).clamp_min(0.0)
        self.put_where(self.hf_travel_ref, cond, travel)
        dt = torch.where(self.hf_t_ref > -1e299, torch.clamp_min(t - self.hf_t_ref, 0.0), torch.zeros_like(t))
        self.put_where(self.hf_t_ref, cond, t)
        x, p = heading_predict(self.hf_x, self.hf_p, self.hf_eye, dphi, dt, self.hf_sigma_b2)
        self.put_where(self.hf_x, cond, x)
        self.put_where(self.hf_p, cond, p)

    def _hf_update(self, j: Tensor, y: Tensor, r: Tensor, w: Tensor, cond: Tensor) -> Tensor:
        """`HeadingDriftFilter.update` of joint j + 1 where ``cond``; True where the fix is taken."""
        n = self.n
        jv = j.view(1)
        jp = (j - 1).clamp_min(0).view(1)
        has_parent = j > 0
        cols = 2 * n + 3 * j + self.ar3
        pj = self.hf_p.index_select(1, jv).squeeze(1)
        ph = torch.where(has_parent, pj - self.hf_p.index_select(1, jp).squeeze(1), pj)
        ph = ph + torch.matmul(self.hf_p.index_select(1, cols), w)
        phj = ph.index_select(0, jv).squeeze(0)
        s = phj - torch.where(has_parent, ph.index_select(0, jp).squeeze(0), torch.zeros_like(phj))
        s = s + torch.dot(ph.index_select(0, cols), w) + r
        y = y - torch.dot(self.hf_x.index_select(0, cols), w)
        valid = cond & torch.isfinite(y) & torch.isfinite(s) & (s > 0.0)
        nis = y * y / s
        row = self.eye_n.index_select(0, jv).squeeze(0)
        self.put_where(self.hf_last_nis, valid & row, nis.expand(n))
        gated = (
            valid
            & (self.hf_gate2 > 0.0)
            & (nis > self.hf_gate2)
            & (self.hf_rejected.index_select(0, jv).squeeze(0) == 0)
        )
        self.put_where(self.hf_rejected, gated & row, torch.ones_like(self.hf_rejected))
        take = valid & ~gated
        self.put_where(self.hf_rejected, take & row, torch.zeros_like(self.hf_rejected))
        k = ph / s
        self.put_where(self.hf_x, take, self.hf_x + k * y)
        p = self.hf_p - torch.outer(k, ph)
        self.put_where(self.hf_p, take, 0.5 * (p + p.transpose(0, 1)))
        return take
