"""The fused shape estimator (`flexlearn.runtime.fusion.estimator.FusedEstimator`) restructured for `torch.export`.

For `torch.export` and ExecuTorch; both twins run the same pure steps (`fusion.quat_quadratic`, `fusion.frame_rules`,
`fusion.heading_filter`, the clock rule `pikit.time_base.clock_step`) and read one list of state buffers
(`fusion.state`).

`FusedEstimator` is written for TorchScript: its time base, pulse bookkeeping and heading filter keep Python
floats, ints and lists as state and branch on tensor values (``bool(...)``, ``float(...)``, ``torch.equal``,
indexing by the firing coil). `torch.export` stops at the first of them (the clock test of ``attitude``,
``bool(good.all())`` of ``magnetometer``; `flexlearn.runtime.export_diagnosis.diagnose_export` names each).
`FusedEstimatorGraph` computes the same three entry points without data-dependent control flow:

* every Python scalar of the estimator, its `TimeBase` (two streams) and its `HeadingDriftFilter` is a 0-d or 1-d
  buffer (``t_att``, ``t_off``, ``coil``, ``nofix_next``, the clock candidates, the filter's ``t_ref`` …);
* every ``if`` on data is evaluated on both sides and selected with ``torch.where``; state is written (in the
  source's order) only where the source writes it; the firing coil j is a tensor index (``index_select``);
* the heading filter and the heading-rate correction are in the mixin `flexlearn.runtime.fusion.heading_graph`;
* the magnetic correction of a pulse (direction model + heading filter) is split off: ``magnetometer_round``
  records a pulse that ends (``pending`` and what the correction reads, as of that moment) and returns
  ``pending``; ``correct_pending`` applies it. The caller runs the second only when the first returns True (a
  host-side branch: the correction is ~10× the cost of a round); ``magnetometer`` runs both, as the source does.

Scope: the default configuration only (``mode="fusion"``, ``bias_model="heading"``, ``reference="body"``, constant
σ_m: a per-fix ``confidence`` source, `flexlearn.runtime.fusion.confidence`, runs only in the TorchScript bundle);
`from_estimator` refuses the others. The diagnostic buffers ``last_um``/``last_db``/``last_target`` (alignment
fit) are not kept. Entry points (inputs float64 except ``coil`` int64; units s, T, m):
``set_reference(quats (N+1, 4)) → has_ref (N+1,)``; ``attitude(t (), quats (N+1, 4)) → (points (N+1, 3) [m],
h () [m], flags (N,) int64)``; ``magnetometer_round(t (), mags (N, 3), coil ()) → pending () bool``;
``correct_pending(request () bool) → applied (N,) bool``.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor, nn

from flexlearn.lie import quat_to_matrix
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.flags import BAD_QUAT, MAG_REJECTED, NO_REFERENCE, STALE_QUAT, TIME_ORDER
from flexlearn.runtime.fusion.frame_rules import (
    child_direction,
    held_quaternions,
    magnetometer_flags,
    timed_flags,
    usable_fix,
)
from flexlearn.runtime.fusion.heading_graph import HeadingFilterGraph
from flexlearn.runtime.fusion.options import FUSION, EstimatorSettingsError
from flexlearn.runtime.fusion.quat_quadratic import (
    angular_travel,
    body_relative_rotation,
    module_directions,
    quadratic_map,
    reference_rows,
)
from flexlearn.runtime.fusion.state import ESTIMATOR_BUFFERS, ESTIMATOR_SCALARS
from flexlearn.runtime.pikit.time_base import ClockState, clock_step

F64 = torch.float64


def _s(x: object, dtype: torch.dtype) -> Tensor:
    return torch.tensor(x, dtype=dtype)


class FusedEstimatorGraph(HeadingFilterGraph, nn.Module):
    """Branch-free twin of a default-configured `FusedEstimator` (module docstring); build with `from_estimator`."""

    # buffers: the estimator's state (`ESTIMATOR_BUFFERS`, `ESTIMATOR_SCALARS` as 0-d tensors), the heading filter's
    # and the time
    # base's (prefixed ``hf_``, ``tb_``) and the pending correction
    t_att: Tensor
    t_all_ok: Tensor
    nofix_next: Tensor
    nofix_any: Tensor
    mag_flagged: Tensor
    coil: Tensor
    t_switch: Tensor
    t_mag: Tensor
    t_off: Tensor
    resync_until: Tensor
    tb_offset: Tensor
    tb_resyncs: Tensor
    tb_t_resync: Tensor
    tb_cand_first: Tensor
    tb_cand_prev: Tensor
    tb_cand_last: Tensor
    tb_cand_n: Tensor
    pending: Tensor
    pend_j: Tensor
    pend_t: Tensor
    pend_db: Tensor
    pend_q_on: Tensor
    tmap_e: Tensor
    # settings copied from the estimator
    settle: float
    full_scale: float
    stale_after: float
    fix_timeout: float
    max_gap: float
    resync_flag_s: float
    tb_max_gap: float
    min_fresh: int
    confirm: int

    def __init__(self, est: FusedEstimator) -> None:
        super().__init__()
        bad = [
            k
            for k, ok in (
                ("mode", est.mode == FUSION),
                ("bias_model", est.bias_model == "heading"),
                ("reference", est.body_ref),
                ("confidence", not est.use_confidence),
            )
            if not ok
        ]
        if bad:
            raise EstimatorSettingsError(
                f"FusedEstimatorGraph covers the default estimator only (mode='fusion', "
                f"bias_model='heading', reference='body', constant sigma_m: no per-fix confidence; "
                f"use the TorchScript bundle for that); this one differs in {bad}"
            )
        self.model = est.model
        self.n = int(est.n)
        self.length = float(est.length)
        for name in ESTIMATOR_BUFFERS:
            self.register_buffer(name, getattr(est, name).detach().clone())
        for name, dtype in ESTIMATOR_SCALARS.items():
            self.register_buffer(name, _s(getattr(est, name), dtype))
        hf, tb = est.hf, est.clock
        for name in ("x", "p", "travel_ref", "eye", "last_nis", "rejected"):
            self.register_buffer("hf_" + name, getattr(hf, name).detach().clone())
        self.register_buffer("hf_t_ref", hf.t_ref.detach().clone())
        for name, value in zip(ClockState._fields, tb.state):
            self.register_buffer("tb_" + name, value.detach().clone())
        self.register_buffer("ar3", torch.arange(3))
        # a pulse that ended in `magnetometer_round`, corrected by `correct_pending` (what it reads, as of then)
        self.register_buffer("pending", torch.zeros((), dtype=torch.bool))
        self.register_buffer("pend_j", torch.zeros((), dtype=torch.int64))
        self.register_buffer("pend_t", torch.zeros((), dtype=F64))
        self.register_buffer("pend_db", torch.zeros(3, dtype=F64))
        self.register_buffer("pend_q_on", self.q_on.clone())
        self.register_buffer("pend_travel", self.travel.clone())
        # T(e) of `quadratic_map`: v_ref is e for every module with reference "body" (a constant, 1.3k ops less)
        self.register_buffer("tmap_e", quadratic_map(est.e.expand(self.n + 1, 3)))
        for name in (
            "sigma_m2",
            "p0",
            "settle",
            "full_scale",
            "stale_after",
            "fix_timeout",
            "max_gap",
            "resync_flag_s",
        ):
            setattr(self, name, float(getattr(est, name)))
        self.min_fresh = int(est.min_fresh)
        self.hf_kappa2, self.hf_sigma_b2 = float(hf.kappa2), float(hf.sigma_b2)
        self.hf_sigma_align2, self.hf_gate2 = float(hf.sigma_align2), float(hf.gate2)
        self.confirm = int(tb.confirm)
        self.tb_max_gap = float(tb.max_gap)

    @classmethod
    def from_estimator(cls, est: FusedEstimator) -> "FusedEstimatorGraph":
        """The twin of ``est`` in its current state (usually freshly built); ``est`` is not changed.

        Args:
            est: a default-configured estimator.

        Returns:
            The graph.

        Raises:
            EstimatorSettingsError: when ``est`` is not default-configured (module docstring).
        """
        return cls(est)

    # ------------------------------------------------------------------------------------------ time base
    def _clock_state(self) -> ClockState:
        return ClockState(
            self.tb_offset,
            self.tb_resyncs,
            self.tb_t_resync,
            self.tb_cand_first,
            self.tb_cand_prev,
            self.tb_cand_last,
            self.tb_cand_n,
        )

    def _clock(self, k: int, t: Tensor, last: Tensor, active: Tensor) -> Tensor:
        """`FusedEstimator._clock` (stream k) applied where ``active``: τ [s] or NaN (drop); the rule is
        `flexlearn.runtime.pikit.time_base.clock_step`, the scripted estimator's own."""
        latest = torch.maximum(self.t_att, self.t_mag)
        state = self._clock_state()
        out, new = clock_step(state, k, t, last, latest, active, self.tb_max_gap, self.confirm)
        for buf, value in zip(state, new):
            buf.copy_(value)
        changed = active & (self.tb_offset != self.t_off)
        self.put_where(self.t_off, changed, self.tb_offset)
        self.put_where(self.resync_until, changed, out + self.resync_flag_s)
        self.put_where(self.nofix_next, changed, torch.full_like(t, -1e300))
        return out

    def _time(self, k: int, t: Tensor, last: Tensor) -> Tensor:
        """Inline in-order test, else the slow clock path: τ [s] or NaN."""
        tau = t + self.t_off
        inorder = (tau > last) & (tau - last <= self.max_gap)
        slow = self._clock(k, t, last, ~inorder)
        return torch.where(inorder, tau, slow)

    # ------------------------------------------------------------------------------------------- setup
    def set_reference(self, quats: Tensor) -> Tensor:
        """`FusedEstimator.set_reference` (q⁰ (N + 1, 4), filter reset); returns the rows accepted.

        Args:
            quats: module quaternions (N + 1, 4) with the robot hanging straight.

        Returns:
            has_ref (N + 1,) bool.
        """
        n = self.n
        q, ok = reference_rows(quats, self.q_ref)
        self.q_ref.copy_(q)
        self.has_ref.copy_(ok)
        r0t = quat_to_matrix(q).transpose(-1, -2)
        self.r0t.copy_(r0t)
        self.v_ref.copy_(self.e.expand(n + 1, 3))
        self.axis.copy_(r0t[:, :, 2])
        self.q_last.copy_(q.clone())  # a distinct value: two buffers set from one node break export
        self.static_flags.copy_(torch.where(ok[1:], 0, NO_REFERENCE))
        self.base_flags.copy_(self.static_flags | self.mag_flags)
        self.tmap.copy_(torch.matmul(self.r0t, self.tmap_e))
        self.bias.zero_()
        self.c_bias.copy_(torch.eye(3, dtype=F64).expand(n, 3, 3))
        self.p_var.fill_(self.p0)
        self.t_p.fill_(1e300)
        for buf in (
            self.off_sum,
            self.off_cnt,
            self.on_sum,
            self.on_cnt,
            self.base_ok,
            self.n_fixes,
            self.rel_c,
            self.theta_applied,
            self.travel,
            self.travel_fix,
        ):
            buf.zero_()
        self.t_fix.fill_(-1e300)
        self.nofix_next.fill_(-1e300)
        self.gain.copy_(self.tmap.clone())
        self.reset_heading_filter()
        self.pending.fill_(False)
        self.q_on.copy_(self.q_last.clone())
        return ok.clone()

    # ---------------------------------------------------------------------------------------- attitude
    def attitude(self, t: Tensor, quats: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """`FusedEstimator.attitude`: t () [s], quats (N + 1, 4) → (points (N + 1, 3) [m], h () [m], flags (N,)).

        Args:
            t: time () [s].
            quats: module quaternions (N + 1, 4).

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        n = self.n
        tau = self._time(0, t, self.t_att)
        keep = ~torch.isnan(tau)
        old_points, old_height, old_flags = self.points.clone(), self.height.clone(), self.flags.clone()
        t = torch.where(keep, tau, self.t_att)
        self.t_att.copy_(t)
        q = quats.to(F64)
        n2 = (q * q).sum(-1)
        all_ok = ((n2 >= 0.999) & (n2 <= 1.001)).all()
        ok, qn = held_quaternions(q, n2, self.q_last)
        slow = keep & ~all_ok
        self.put_where(self.q_time, slow, torch.where(ok, t, torch.clamp_min(self.q_time, self.t_all_ok)))
        qs = torch.where(all_ok, q, qn)
        self.put_where(self.q_last, keep, qs)
        self.put_where(self.t_all_ok, keep & all_ok, t)
        self.put_where(self.bad_now, slow, torch.where(ok[1:], 0, BAD_QUAT))
        u = module_directions(self.gain, qs)
        points = torch.matmul(self.chain, u)
        height = points[n, 2] + n * self.length
        stale = torch.where(t - self.q_time[1:] > self.stale_after, STALE_QUAT, 0)
        fl = torch.where(all_ok, self.base_flags, self.base_flags | self.bad_now | stale)
        self._refresh_nofix(t, keep & (t >= self.nofix_next))
        fl = fl | self.nofix_flags
        self.put_where(self.u_hat, keep, u[1:])
        self.put_where(self.points, keep, points)
        self.put_where(self.height, keep, height)
        self.put_where(self.flags, keep, fl)
        return (
            torch.where(keep, points, old_points),
            torch.where(keep, height, old_height),
            torch.where(keep, fl, old_flags | TIME_ORDER),
        )

    def _refresh_nofix(self, t: Tensor, cond: Tensor) -> None:
        fl, nxt = timed_flags(t, self.t_fix, self.fix_timeout, self.resync_until)
        self.put_where(self.nofix_flags, cond, fl)
        self.put_where(self.nofix_any, cond, (fl != 0).any())
        self.put_where(self.nofix_next, cond, nxt)

    # ------------------------------------------------------------------------------------ magnetometer
    def _set_mag_flags(self, cond: Tensor, fl: Tensor) -> None:
        self.put_where(self.mag_flags, cond, fl)
        self.put_where(self.base_flags, cond, self.static_flags | fl)
        self.put_where(self.mag_flagged, cond, (fl != 0).any())

    def magnetometer(self, t: Tensor, mags: Tensor, coil: Tensor) -> Tensor:
        """`FusedEstimator.magnetometer`: `magnetometer_round` then `correct_pending`.

        Exported as two methods: the caller runs the second only when the first returns True, so that the correction
        runs once per pulse, not every round.

        Args:
            t: time () [s].
            mags: raw readings (N, 3) [T].
            coil: the firing module () int64.

        Returns:
            The corrections applied (N,).
        """
        return self.correct_pending(self.magnetometer_round(t, mags, coil))

    def magnetometer_round(self, t: Tensor, mags: Tensor, coil: Tensor) -> Tensor:
        """A magnetometer round without the magnetic correction of a pulse that ends in it.

        That correction is recorded (``pending``, with what the correction reads as of this moment).

        Args:
            t: time () [s].
            mags: raw readings (N, 3) [T].
            coil: the firing module () int64.

        Returns:
            ``pending`` () bool.
        """
        n = self.n
        tau = self._time(1, t, self.t_mag)
        keep = ~torch.isnan(tau)
        self._set_mag_flags(~keep, torch.full_like(self.mag_flags, TIME_ORDER))
        t = torch.where(keep, tau, self.t_mag)
        self.t_mag.copy_(t)
        m = mags.to(F64)
        good, finite, fl = magnetometer_flags(m, self.prev_raw, self.full_scale)
        all_good = good.all()
        self.put_where(self.prev_raw, keep, torch.where((finite | all_good).unsqueeze(-1), m, self.prev_raw))
        self._set_mag_flags(keep & (~all_good | self.mag_flagged), torch.where(all_good, 0, fl))
        coil = coil.to(torch.int64)
        cur = self.coil.clone()
        switch = keep & (coil != cur)
        old_ok = (cur >= 0) & (cur < n)
        new_ok = (coil >= 0) & (coil < n)
        self._end_pulse(cur.clamp(0, n - 1), t, switch & old_ok)
        self.put_where(self.coil, switch, coil)
        self.put_where(self.t_switch, switch, t)
        jn = coil.clamp(0, n - 1)
        row = self.eye_n.index_select(0, jn.view(1)).squeeze(0)
        confirm = switch & new_ok
        has_off = (self.off_cnt > 0.0) & row & confirm
        self.put_where(self.base, has_off.unsqueeze(-1), self.off_sum / self.off_cnt.clamp_min(1.0).unsqueeze(-1))
        self.put_where(self.base_ok, has_off, torch.ones_like(self.base_ok))
        self.put_where(self.on_sum, (row & confirm).unsqueeze(-1), torch.zeros_like(self.on_sum))
        self.put_where(self.on_cnt, row & confirm, torch.zeros_like(self.on_cnt))
        self.put_where(self.travel, confirm, self.travel + angular_travel(self.q_on, self.q_last))
        self.put_where(self.q_on, confirm, self.q_last)
        self.put_where(self.off_sum, switch, torch.zeros_like(self.off_sum))
        self.put_where(self.off_cnt, switch, torch.zeros_like(self.off_cnt))
        settled = keep & ~switch & ~(t - self.t_switch < self.settle)
        jc = cur.clamp(0, n - 1)
        rowc = self.eye_n.index_select(0, jc.view(1)).squeeze(0)
        on = settled & old_ok & rowc & good
        self.on_sum.copy_(self.on_sum + torch.where(on.unsqueeze(-1), m, torch.zeros_like(m)))
        self.on_cnt.copy_(self.on_cnt + on.to(F64))
        off = settled & (cur < 0)
        self.put_where(
            self.off_sum,
            off,
            torch.where(all_good, self.off_sum + m, self.off_sum + torch.where(good.unsqueeze(-1), m, 0.0)),
        )
        self.put_where(self.off_cnt, off, torch.where(all_good, self.off_cnt + 1.0, self.off_cnt + good.to(F64)))
        return self.pending.clone()

    def _end_pulse(self, j: Tensor, t: Tensor, finish: Tensor) -> None:
        """End of coil j's pulse (where ``finish``): too few fresh samples or no baseline → MAG_REJECTED; else the
        correction from the mean coil-on field is made pending (`correct_pending`)."""
        jv = j.view(1)
        row = self.eye_n.index_select(0, jv).squeeze(0)
        cnt = self.on_cnt.index_select(0, jv)
        enough = (cnt.squeeze(0) >= float(self.min_fresh)) & self.base_ok.index_select(0, jv).squeeze(0)
        self._set_mag_flags(finish & ~enough, self.mag_flags | torch.where(row, MAG_REJECTED, 0))
        attempt = finish & enough
        db = self.on_sum.index_select(0, jv) / cnt.clamp_min(1.0).unsqueeze(-1) - self.base.index_select(0, jv)
        self.pending.copy_(attempt)
        self.put_where(self.pend_j, attempt, j)
        self.put_where(self.pend_t, attempt, t)
        self.put_where(self.pend_db, attempt, db.squeeze(0))
        self.put_where(self.pend_q_on, attempt, self.q_on.clone())
        self.put_where(self.pend_travel, attempt, self.travel.clone())

    def correct_pending(self, request: Tensor) -> Tensor:
        """The pending correction where ``request`` () bool (the round's answer; a method without inputs trips
        ExecuTorch 1.5.1's constant lifting): `FusedEstimator.correct` of the pulse's segment, MAG_REJECTED when
        it is not taken; mask (N,) of the correction applied (all False when none was pending).

        Args:
            request: () bool, whether to apply the pending correction.

        Returns:
            applied (N,) bool.
        """
        j = self.pend_j
        attempt = self.pending & request
        accepted = self._correct(j, self.pend_db, self.pend_t, attempt)
        row = self.eye_n.index_select(0, j.view(1)).squeeze(0)
        self._set_mag_flags(attempt & ~accepted, self.mag_flags | torch.where(row, MAG_REJECTED, 0))
        self.pending.fill_(False)
        return row & accepted

    def _relative(self, k: Tensor) -> Tensor:
        """R_k at coil activation (reference "body"): R(q_k⁰)ᵀ R(q_k), k a 1-element index."""
        return body_relative_rotation(
            self.r0t.index_select(0, k).squeeze(0), self.pend_q_on.index_select(0, k).squeeze(0)
        )

    def _correct(self, j: Tensor, delta_b: Tensor, t: Tensor, attempt: Tensor) -> Tensor:
        """`FusedEstimator.correct` of segment j + 1 (where ``attempt``) with the heading-rate model."""
        n = self.n
        jv = j.view(1)
        row = self.eye_n.index_select(0, jv).squeeze(0)
        db = delta_b.to(F64)
        x = torch.matmul(self.aw.index_select(0, jv).squeeze(0), db)
        f = self.model(x.to(torch.float32).unsqueeze(0)).squeeze(0).detach().to(F64)
        go = attempt & usable_fix(db, f)
        d = child_direction(f, self.flip)
        self.put_where(self.n_fixes, go & row, self.n_fixes + 1)
        self.put_where(self.t_fix, go & row, t.expand(n))
        self.put_where(self.nofix_next, go, torch.full_like(t, -1e300))
        has_parent = j > 0
        jp = (j - 1).clamp_min(0).view(1)
        r_par = self._relative(jv)
        r_par = torch.where(has_parent, torch.matmul(self.c_bias.index_select(0, jp).squeeze(0), r_par), r_par)
        um = torch.matmul(r_par, d)
        uq = torch.matmul(self._relative(jv + 1), self.e)
        trav = torch.stack([self.pend_travel.index_select(0, jv + 1), self.pend_travel.index_select(0, jv)], -1)
        self.put_where(self.travel_fix, (go & row).unsqueeze(-1), trav.expand(n, 2))
        return self.heading_rate_correction(j, uq, um, r_par, t, go)

    def forward(self, t: Tensor, quats: Tensor, mags: Tensor, coil: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused step: magnetometer round then attitude sweep (as `FusedEstimator.forward`).

        Args:
            t: time () [s].
            quats: module quaternions (N + 1, 4).
            mags: raw readings (N, 3) [T].
            coil: the firing module () int64.

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        self.magnetometer(t, mags, coil)
        return self.attitude(t, quats)
