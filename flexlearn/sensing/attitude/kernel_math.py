"""Scalar quaternion and filter helpers of the attitude kernels (:mod:`flexlearn.sensing.attitude.kernels`).

Plain-float functions that numba compiles into the offline batch and TorchScript scripts into the runtime step:
the Hamilton product and rotation of (w, x, y, z) quaternions, a normalised store, the second-order Butterworth
low-pass (transposed direct form II with a running-mean start-up) and its coefficients, angle wrapping, a
finiteness test and the 6-axis orientation of the state (:func:`q6`). ``s`` is the filter's state vector; its
layout is in the ``kernels`` module docstring.
"""

import math
from typing import List, Tuple

from flexlearn.optional_numba import jitable


@jitable
def qmul(
    aw: float, ax: float, ay: float, az: float, bw: float, bx: float, by: float, bz: float
) -> Tuple[float, float, float, float]:
    """Hamilton product a ⊗ b.

    Args:
        aw: w of a.
        ax: x of a.
        ay: y of a.
        az: z of a.
        bw: w of b.
        bx: x of b.
        by: y of b.
        bz: z of b.

    Returns:
        a ⊗ b as (w, x, y, z).
    """
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


@jitable
def qrot(w: float, x: float, y: float, z: float, vx: float, vy: float, vz: float) -> Tuple[float, float, float]:
    """R(q) v = v + 2w (u × v) + 2 u × (u × v), u = (x, y, z).

    Args:
        w: w of the unit quaternion q.
        x: x of q.
        y: y of q.
        z: z of q.
        vx: x of v.
        vy: y of v.
        vz: z of v.

    Returns:
        R(q) v as (x, y, z).
    """
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx)


@jitable
def store_unit(s: List[float], o: int, w: float, x: float, y: float, z: float) -> None:
    """s[o:o+4] ← q / ‖q‖.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        o: offset of the quaternion in s.
        w: w of q.
        x: x of q.
        y: y of q.
        z: z of q.
    """
    n = math.sqrt(w * w + x * x + y * y + z * z)
    s[o] = w / n
    s[o + 1] = x / n
    s[o + 2] = y / n
    s[o + 3] = z / n


@jitable
def lowpass(s: List[float], o: int, n: int, cf: List[float], c: int, ts: float) -> None:
    """Second-order Butterworth low-pass of the n values at s[o:o+n], in place (input → output).

    Transposed direct form II with coefficients ``cf[c:c+5] = (b0, b1, b2, a1, a2)`` (``cf`` is the parameter
    vector, or the state for the scheduled accelerometer filter): ``y = b0 x + z0;  z0 ← b1 x − a1 y + z1;
    z1 ← b2 x − a2 y``. Start-up (count s[o+3n] ≥ 0): the output is the running mean of the inputs until
    ``count·Ts ≥ τ = cf[c+5]``, then the states are set to the steady state of that mean (``z0 = m(1 − b0)``,
    ``z1 = m(b2 − a2)``) and the filter runs (count −1).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        o: offset of the low-pass block in s.
        n: number of values filtered.
        cf: the vector holding the coefficients (p, or s).
        c: offset of the coefficients in cf.
        ts: sample period Ts [s].
    """
    m = o + 3 * n
    cnt = s[m]
    if cnt >= 0.0:
        cnt = cnt + 1.0
        s[m] = cnt
        for i in range(n):
            s[m + 1 + i] = s[m + 1 + i] + s[o + i]
            s[o + i] = s[m + 1 + i] / cnt
        if cnt * ts >= cf[c + 5]:
            for i in range(n):
                y = s[o + i]
                s[o + n + i] = y * (1.0 - cf[c])
                s[o + 2 * n + i] = y * (cf[c + 2] - cf[c + 4])
            s[m] = -1.0
        return
    b0 = cf[c]
    b1 = cf[c + 1]
    b2 = cf[c + 2]
    a1 = cf[c + 3]
    a2 = cf[c + 4]
    for i in range(n):
        x = s[o + i]
        y = b0 * x + s[o + n + i]
        s[o + n + i] = b1 * x - a1 * y + s[o + 2 * n + i]
        s[o + 2 * n + i] = b2 * x - a2 * y
        s[o + i] = y


@jitable
def butter_into(s: List[float], o: int, tau: float, ts: float) -> None:
    """s[o:o+6] ← second-order Butterworth (b0, b1, b2, a1, a2) for time constant tau [s] and τ itself.

    The same formula as ``offline.butter2`` (f_c = √2/(2π τ), bilinear transform with pre-warping); τ < Ts/2 gives
    the pass-through (1, 0, 0, 0, 0).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        o: offset of the coefficients in s.
        tau: time constant τ [s].
        ts: sample period Ts [s].
    """
    s[o + 5] = tau
    if tau < 0.5 * ts:
        s[o] = 1.0
        s[o + 1] = 0.0
        s[o + 2] = 0.0
        s[o + 3] = 0.0
        s[o + 4] = 0.0
        return
    c = math.tan(math.pi * math.sqrt(2.0) / (2.0 * math.pi * tau) * ts)
    d = c * c + math.sqrt(2.0) * c + 1.0
    b0 = c * c / d
    s[o] = b0
    s[o + 1] = 2.0 * b0
    s[o + 2] = b0
    s[o + 3] = 2.0 * (c * c - 1.0) / d
    s[o + 4] = (c * c - math.sqrt(2.0) * c + 1.0) / d


@jitable
def lowpass_reset(s: List[float], o: int, n: int) -> None:
    """Restart the running-mean start-up of the low-pass block at o (after a gap).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        o: offset of the low-pass block in s.
        n: number of values of the block.
    """
    m = o + 3 * n
    s[m] = 0.0
    for i in range(n):
        s[m + 1 + i] = 0.0


@jitable
def wrap_pi(a: float) -> float:
    """Angle wrapped into [−π, π].

    Args:
        a: angle [rad], within one turn of [−π, π] (a single ±2π shift is applied).

    Returns:
        The wrapped angle [rad].
    """
    if a > math.pi:
        return a - 2.0 * math.pi
    if a < -math.pi:
        return a + 2.0 * math.pi
    return a


@jitable
def finite3(x: float, y: float, z: float) -> bool:
    """All three finite (x − x is NaN for NaN and ±inf).

    Args:
        x: first value.
        y: second value.
        z: third value.

    Returns:
        True when x, y and z are finite.
    """
    return x - x == 0.0 and y - y == 0.0 and z - z == 0.0


@jitable
def q6(s: List[float]) -> Tuple[float, float, float, float]:
    """The 6-axis orientation q_{E_i S} = q_a ⊗ q_g.

    Args:
        s: the state vector (layout in the `kernels` module docstring: q_g = s[0:4], q_a = s[4:8]).

    Returns:
        q_{E_i S} as (w, x, y, z).
    """
    return qmul(s[4], s[5], s[6], s[7], s[0], s[1], s[2], s[3])
