"""Raw-IMU front end for the fused runtime: modules that stream gyro + accelerometer instead of a quaternion.

`flexlearn.runtime.fusion.estimator.FusedEstimator` consumes one quaternion per module (a game rotation vector: body →
the IMU's own world frame, z up, arbitrary heading). Modules whose IMU streams raw samples get that quaternion
from one `flexlearn.sensing.attitude.step.AttitudeStep` each (6-axis attitude filter, VQF method; see
docs/attitude.md). A 6-axis estimate is exactly such a game rotation vector: inclination from gravity, heading
that of the filter's start, drifting with the vertical gyro-bias residual — the drift the estimator's heading
model tracks, and the initial heading cancels in its ``reference="body"`` form R_i = R(q_i⁰)ᵀ R(q_i).

* :class:`RawImuAttitude` — (M, 3) gyro [rad/s] and accelerometer [m/s²] rows, one per module, → (M, 4)
  quaternions (w, x, y, z). Each call is one IMU sample of every module at ``rate_hz``; a non-finite row is
  skipped by that module's filter (it keeps its last estimate), the output is never NaN.
* :class:`RawImuEstimator` — the front end before an estimator: ``attitude(t, gyrs, accs)``,
  ``magnetometer(t, mags, coil)`` and ``forward(t, gyrs, accs, mags, coil)`` with the estimator's outputs;
  ``set_reference()`` records the current filter quaternions as q⁰ (the robot hanging straight, after the
  filters have settled — a few τ_acc = 3 s at rest).

Both are ``torch.jit.script``-able; the filter states travel with the saved module.
"""

from typing import List, Optional, Protocol, Tuple, cast

import torch
from torch import Tensor, nn

from flexlearn.runtime.fusion.options import EstimatorSettingsError
from flexlearn.sensing.attitude.offline import AttitudeConfig
from flexlearn.sensing.attitude.step import AttitudeStep

__all__ = ["RawImuAttitude", "RawImuEstimator"]


class _AttitudeEstimator(Protocol):
    """What `RawImuEstimator` calls on its estimator (the methods of `FusedEstimator`)."""

    def attitude(self, t: float, q: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """The attitude sweep.

        Args:
            t: time [s].
            q: module quaternions (N + 1, 4).

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        ...

    def magnetometer(self, t: float, mags: Tensor, coil: int) -> Tensor:
        """The magnetometer round.

        Args:
            t: time [s].
            mags: raw readings (N, 3) [T].
            coil: the firing module (−1: none).

        Returns:
            The per-segment mask (N,) of magnetic corrections applied.
        """
        ...

    def set_reference(self, q_ref: Tensor) -> None: ...


class RawImuAttitude(nn.Module):
    """One 6-axis `AttitudeStep` per module: ``forward(gyrs (M, 3), accs (M, 3)) → quats (M, 4)`` float64.

    Args:
        n_modules: M (N + 1 for a robot with N joints: the base module and N sensing modules).
        rate_hz: IMU sampling rate [Hz] (one ``forward`` per sample of every module).
        config: attitude filter parameters (`AttitudeConfig`; defaults: one set for every IMU).
    """

    def __init__(self, n_modules: int, rate_hz: float, config: Optional[AttitudeConfig] = None) -> None:
        super().__init__()
        if n_modules < 1:
            raise EstimatorSettingsError(f"n_modules = {n_modules}: expected ≥ 1")
        self.steps = nn.ModuleList([AttitudeStep(rate_hz, config) for _ in range(n_modules)])
        self.n_modules = n_modules

    def forward(self, gyrs: Tensor, accs: Tensor) -> Tensor:
        """One filter step of every module.

        Args:
            gyrs: gyro samples (M, 3) [rad/s].
            accs: accelerometer samples (M, 3) [m/s²].

        Returns:
            Quaternions (M, 4) float64.
        """
        out: List[Tensor] = []
        for i, step in enumerate(self.steps):
            out.append(step(gyrs[i], accs[i]))
        return torch.stack(out)

    @torch.jit.export
    def reset(self) -> None:
        """Every filter back to its start state."""
        for step in self.steps:
            getattr(step, "reset")()  # noqa: B009 (an AttitudeStep; ModuleList items are typed nn.Module for mypy)

    @torch.jit.export
    def skipped(self) -> List[int]:
        """Non-finite samples skipped so far, per module."""
        out: List[int] = []
        for step in self.steps:
            out.append(getattr(step, "skipped")())  # noqa: B009 (as in `reset`)
        return out


class RawImuEstimator(nn.Module):
    """`RawImuAttitude` in front of a fused estimator (`FusedEstimator` or anything with its ``attitude``,
    ``magnetometer`` and ``set_reference`` methods) for robots whose modules stream raw IMU samples.

    ``attitude(t, gyrs (N+1, 3), accs (N+1, 3))`` → the estimator's ``(points (N+1, 3) [m], h () [m], flags (N,))``;
    ``forward(t, gyrs, accs, mags (N, 3) [T], coil)`` = ``magnetometer`` then ``attitude`` (as `FusedEstimator`).
    """

    q_last: Tensor  # registered buffer: the latest filter quaternions (N + 1, 4)

    def __init__(self, estimator: nn.Module, rate_hz: float, config: Optional[AttitudeConfig] = None) -> None:
        super().__init__()
        # getattr: nn.Module attributes are typed Tensor | Module for mypy
        n = int(getattr(estimator, "n")) + 1 if hasattr(estimator, "n") else int(getattr(estimator, "q_ref").shape[0])  # noqa: B009
        self.imus = RawImuAttitude(n, rate_hz, config)
        self.estimator: _AttitudeEstimator = cast(_AttitudeEstimator, estimator)
        self.register_buffer("q_last", torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).repeat(n, 1))

    @torch.jit.export
    def attitude(self, t: float, gyrs: Tensor, accs: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One IMU sample of every module → filter quaternions → the estimator's attitude sweep at t [s].

        Args:
            t: time [s].
            gyrs: gyro samples (N + 1, 3) [rad/s].
            accs: accelerometer samples (N + 1, 3) [m/s²].

        Returns:
            The estimator's ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        q = self.imus(gyrs, accs)
        self.q_last.copy_(q)
        return self.estimator.attitude(t, q)

    @torch.jit.export
    def magnetometer(self, t: float, mags: Tensor, coil: int) -> Tensor:
        """The estimator's magnetometer round (the raw IMU path does not touch it).

        Args:
            t: time [s].
            mags: raw readings (N, 3) [T].
            coil: the firing module (−1: none).

        Returns:
            The per-segment mask (N,) of magnetic corrections applied.
        """
        return self.estimator.magnetometer(t, mags, coil)

    @torch.jit.export
    def set_reference(self) -> None:
        """Record the latest filter quaternions as the straight reference q⁰ (and reset the estimator)."""
        self.estimator.set_reference(self.q_last)

    @torch.jit.export
    def quaternions(self) -> Tensor:
        """The latest filter quaternions (N + 1, 4)."""
        return self.q_last.clone()

    def forward(self, t: float, gyrs: Tensor, accs: Tensor, mags: Tensor, coil: int) -> Tuple[Tensor, Tensor, Tensor]:
        """``magnetometer`` then ``attitude`` (as `FusedEstimator`).

        Args:
            t: time [s].
            gyrs: gyro samples (N + 1, 3) [rad/s].
            accs: accelerometer samples (N + 1, 3) [m/s²].
            mags: raw magnetometer readings (N, 3) [T].
            coil: the firing module (−1: none).

        Returns:
            The estimator's ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        self.magnetometer(t, mags, coil)
        return self.attitude(t, gyrs, accs)
