"""Per-sample kernels of the attitude filter, written once for two compilers: numba and TorchScript.

Every function here works on plain floats, a state vector ``s`` and a parameter vector ``p`` (a float64
``numpy`` array under numba, a ``List[float]`` under TorchScript), so the offline path
(:func:`run_batch`, compiled with numba) and the runtime step (:class:`~flexlearn.sensing.attitude.step.
AttitudeStep`, ``torch.jit.script``) execute the same arithmetic and agree to round-off. The method follows
D. Laidig, T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation and magnetic
disturbance rejection", *Information Fusion* 91:187–204, 2023 (doi:10.1016/j.inffus.2022.10.014); the
equations are restated where they are used and in ``docs/attitude.md``. Frames: S sensor; I almost-inertial
(gyro strapdown only); E_i the 6-axis world (z up, heading arbitrary); E the 9-axis world (ENU). Quaternions
are (w, x, y, z), ``q_AB`` maps B-frame coordinates to A.

State layout ``s`` (``STATE_SIZE`` floats; literals below, as TorchScript has no global constants)::

    0-3  q_g = q_IS (strapdown)       4-7  q_a = q_{E_i I} (inclination correction)   8  δ [rad] (heading)
    9    rest flag                    10   rest time [s]      11  magnetic disturbance flag
    12-14 gyro bias b̂ [rad/s]         15-23 bias covariance P (3×3, row major) [(rad/s)²]
    24   skipped samples (count)      25   time since the last valid gyro sample [s]
    26-28 last bias-free rate [rad/s] 29   k_init (1/n heading gain of the start)
    30-31 magnetic reference norm, dip [rad]      32 undisturbed time [s]   33 rejection time [s]
    34-35 candidate norm, dip [rad]   36   candidate time [s]
    low-pass blocks (input/output x[n], states z0[n], z1[n], sample count (−1: running), sum[n]):
    40 acc in I (n=3)   53 rest gyro (3)   66 rest acc (3)   79 bias R (9)   116 bias R·b̂ (2)   125 mag (2)
    134-142 the 3×3 identity (H of the rest update; constant)
    143-148 accelerometer low-pass coefficients (b0, b1, b2, a1, a2, τ) (scheduled, see acc_time_constant)
    149  inclination uncertainty σ_θ after a gap [rad] (see gap_uncertainty)

Parameter layout ``p``: built by :func:`flexlearn.sensing.attitude.offline.make_params` (``PARAM_SIZE``).
"""

import math
from pathlib import Path
from typing import List, Tuple

from flexlearn.numba_cache import refresh_numba_cache
from flexlearn.optional_numba import jitable, njit
from flexlearn.sensing.attitude.gyro_bias import bias_noise, bias_update
from flexlearn.sensing.attitude.kernel_math import (
    butter_into,
    finite3,
    lowpass,
    lowpass_reset,
    q6,
    qmul,
    qrot,
    store_unit,
    wrap_pi,
)

# numba's cache of run_batch does not see edits of the helpers it calls from kernel_math and gyro_bias: one
# fingerprint over all three
refresh_numba_cache(Path(__file__).parent, ("kernels",), "attitude_kernels", depends=("kernel_math", "gyro_bias"))

STATE_SIZE = 150
PARAM_SIZE = 46


@jitable
def acc_time_constant(s: List[float], p: List[float]) -> None:
    """Accelerometer time constant from the bias and inclination uncertainties (coefficients in s[143:149]).

    The inclination error of the low-pass in I has two parts: the drift of an unknown gyro bias seen through
    the filter's lag (group delay τ at low frequency), ≈ σ_b τ, and linear acceleration let through: for a
    velocity swing V at frequency ω the second-order filter passes ω V (ω_c/ω)² = 2V/(ω τ²), ∝ 1/τ². The sum of
    squares ``σ_b² τ² + c² τ⁻⁴`` is least at ``τ⁶ = 2c²/σ_b²``, i.e. τ ∝ σ_b^(−1/3). With τ_acc the choice at
    the settled uncertainty σ_motion: ``τ = τ_acc · min(1, (σ_motion/σ)^(1/3))``. So the filter starts
    (σ_b = σ_init = 5 σ_motion: τ = 0.58 τ_acc) faster and lengthens τ as the bias is learnt.
    After a gap (``gap_uncertainty``, p[43] = 1) the inclination is uncertain by σ_θ (s[149], grown through the
    gap by :func:`gap_uncertainty`); an error σ_θ to be removed within the lag τ_acc weighs like a drift
    σ_θ/τ_acc, so ``σ² = max(max diag P, (σ_θ/τ_acc)²)``. The low-pass removes an initial error as
    ``exp(−t/τ)`` (second-order Butterworth, ω_c = √2/τ), so σ_θ ← σ_θ exp(−Ts/τ) per sample, and τ returns
    to its bias-set value as σ_θ falls. p[44] = 0: fixed τ_acc. The coefficients are recomputed when τ
    moves by more than 0.5 %.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
    """
    tau = p[6]
    if p[44] > 0.5:
        pm = max(s[15], max(s[19], s[23]))
        if p[43] > 0.5:
            pm = max(pm, (s[149] / p[6]) ** 2)
        if pm > p[45]:
            tau = tau * (p[45] / pm) ** (1.0 / 6.0)  # (σ_m² / σ_b²)^(1/6)
    if abs(tau - s[148]) > 0.005 * s[148]:
        butter_into(s, 143, tau, p[0])
    if s[149] > 0.0:
        s[149] = s[149] * math.exp(-p[0] / s[148])


@jitable
def gap_uncertainty(s: List[float], p: List[float]) -> None:
    """Inclination uncertainty through one missing gyro sample: ``σ_θ ← min(π, σ_θ + (‖ω_last‖ + σ_b) Ts)`` [rad].

    σ_θ is s[149]: the rotation of the gap is unknown up to the last bias-free rate (s[26:29], the sensor
    may keep turning at it or stop) plus the bias uncertainty σ_b = √(max diag P) integrated over the gap.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
    """
    w = math.sqrt(s[26] * s[26] + s[27] * s[27] + s[28] * s[28])
    sb = math.sqrt(max(s[15], max(s[19], s[23])))
    s[149] = min(math.pi, s[149] + (w + sb) * p[0])


@jitable
def integrate(s: List[float], wx: float, wy: float, wz: float, dt: float) -> None:
    """Strapdown: q_g ← q_g ⊗ [cos(‖ω‖dt/2), sin(‖ω‖dt/2) ω/‖ω‖] (exact for a constant rate over dt).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        wx: ω_x [rad/s].
        wy: ω_y [rad/s].
        wz: ω_z [rad/s].
        dt: time step [s].
    """
    nw = math.sqrt(wx * wx + wy * wy + wz * wz)
    if nw > 0.0:
        h = 0.5 * nw * dt
        k = math.sin(h) / nw
        q = qmul(s[0], s[1], s[2], s[3], math.cos(h), k * wx, k * wy, k * wz)
        store_unit(s, 0, q[0], q[1], q[2], q[3])


@jitable
def gyr_update(s: List[float], p: List[float], gx: float, gy: float, gz: float) -> None:
    """Gyro rest test and strapdown with the bias-free rate ω − b̂ [rad/s].

    Rest is broken when ‖ω − LP(ω)‖ ≥ p[27] or max|LP(ω)| > bias clip p[21] (LP: Butterworth τ_rest).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        gx: gyro x [rad/s].
        gy: gyro y [rad/s].
        gz: gyro z [rad/s].
    """
    s[53] = gx
    s[54] = gy
    s[55] = gz
    lowpass(s, 53, 3, p, 7, p[0])
    dx = gx - s[53]
    dy = gy - s[54]
    dz = gz - s[55]
    big = max(abs(s[53]), max(abs(s[54]), abs(s[55])))
    if dx * dx + dy * dy + dz * dz >= p[27] * p[27] or big > p[21]:
        s[10] = 0.0
        s[9] = 0.0
    wx = gx - s[12]
    wy = gy - s[13]
    wz = gz - s[14]
    s[26] = wx
    s[27] = wy
    s[28] = wz
    integrate(s, wx, wy, wz, p[0])


@jitable
def acc_update(s: List[float], p: List[float], ax: float, ay: float, az: float) -> None:
    """Accelerometer rest test, inclination correction and bias update (VQF §3.2).

    ``a_I = R(q_g) a`` is low-passed in the almost-inertial frame (linear acceleration there is the
    derivative of a bounded velocity, so its low-pass vanishes while gravity stays), rotated to E_i,
    ``a_E = R(q_a) LP(a_I) / ‖·‖``, and the correction that turns a_E onto e_z is applied in full:
    ``q_a ← [c, a_y/(2c), −a_x/(2c), 0] ⊗ q_a`` with ``c = √((1 + a_z)/2)``. An all-zero sample is ignored.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        ax: accelerometer x [m/s²].
        ay: accelerometer y [m/s²].
        az: accelerometer z [m/s²].
    """
    if ax == 0.0 and ay == 0.0 and az == 0.0:
        return
    s[66] = ax
    s[67] = ay
    s[68] = az
    lowpass(s, 66, 3, p, 7, p[0])
    dx = ax - s[66]
    dy = ay - s[67]
    dz = az - s[68]
    if dx * dx + dy * dy + dz * dz >= p[28] * p[28]:
        s[10] = 0.0
        s[9] = 0.0
    else:
        s[10] = s[10] + p[0]
        if s[10] >= p[29]:
            s[9] = 1.0
    v = qrot(s[0], s[1], s[2], s[3], ax, ay, az)
    s[40] = v[0]
    s[41] = v[1]
    s[42] = v[2]
    acc_time_constant(s, p)
    lowpass(s, 40, 3, s, 143, p[0])
    e = qrot(s[4], s[5], s[6], s[7], s[40], s[41], s[42])
    n = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
    if n == 0.0:
        return
    ex = e[0] / n
    ey = e[1] / n
    c = math.sqrt(max(0.5 * (e[2] / n + 1.0), 0.0))
    if c > 1e-6:
        qc = qmul(c, 0.5 * ey / c, -0.5 * ex / c, 0.0, s[4], s[5], s[6], s[7])
    else:
        qc = qmul(0.0, 1.0, 0.0, 0.0, s[4], s[5], s[6], s[7])
    store_unit(s, 4, qc[0], qc[1], qc[2], qc[3])
    if p[40] > 0.5 or p[41] > 0.5:
        bias_update(s, p, ex, ey)


@jitable
def mag_reference(s: List[float], p: List[float], nrm: float, dip: float) -> None:
    """Magnetic disturbance detection (VQF §3.4): compare (‖m‖, dip) with the accepted reference.

    Undisturbed when ``|‖m‖ − n_ref| < th_n n_ref`` and ``|dip − dip_ref| < th_dip`` for ``t_min``; the
    reference then tracks slowly (k_ref). A new field is accepted as reference after a candidate has held
    steady for ``t_new`` while the sensor turned (≥ ω_new), or ``t_first`` when there is no reference yet.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        nrm: ‖m‖ of the sample (magnetometer unit).
        dip: its dip angle [rad].
    """
    dt = p[0]
    if abs(nrm - s[30]) < p[30] * s[30] and abs(dip - s[31]) < p[31]:
        s[32] = s[32] + dt
        if s[32] >= p[35]:
            s[11] = 0.0
            s[30] = s[30] + p[20] * (nrm - s[30])
            s[31] = s[31] + p[20] * (dip - s[31])
    else:
        s[32] = 0.0
        s[11] = 1.0
    if abs(nrm - s[34]) < p[30] * s[34] and abs(dip - s[35]) < p[31]:
        if math.sqrt(s[53] * s[53] + s[54] * s[54] + s[55] * s[55]) >= p[34]:
            s[36] = s[36] + dt
        s[34] = s[34] + p[20] * (nrm - s[34])
        s[35] = s[35] + p[20] * (dip - s[35])
        if s[11] > 0.5 and (s[36] >= p[32] or (s[30] == 0.0 and s[36] >= p[33])):
            s[30] = s[34]
            s[31] = s[35]
            s[11] = 0.0
            s[32] = p[35]
    else:
        s[36] = 0.0
        s[34] = nrm
        s[35] = dip


@jitable
def mag_update(s: List[float], p: List[float], mx: float, my: float, mz: float) -> None:
    """Heading δ from the magnetometer (VQF §3.4): ``m_E = R(q_{E_i S}) m``, disagreement
    ``φ = atan2(m_E,x, m_E,y) − δ`` (wrapped), ``δ ← δ + k φ`` with ``k = 1 − exp(−Ts/τ_mag)``; k = 0 while a
    disturbance is detected (up to t_rej, then k/f_rej), and k ≥ 1/n for the first samples (fast start).
    Only δ changes: the magnetometer never touches the inclination.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        mx: magnetometer x (any unit).
        my: magnetometer y.
        mz: magnetometer z.
    """
    if mx == 0.0 and my == 0.0 and mz == 0.0:
        return
    w, x, y, z = q6(s)
    e = qrot(w, x, y, z, mx, my, mz)
    dt = p[0]
    if p[42] > 0.5:
        nrm = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
        s[125] = nrm
        s[126] = -math.asin(min(max(e[2] / nrm, -1.0), 1.0))
        if p[18] > 0.0:
            lowpass(s, 125, 2, p, 13, p[0])
        mag_reference(s, p, s[125], s[126])
    phi = wrap_pi(math.atan2(e[0], e[1]) - s[8])
    k = p[19]
    if p[42] > 0.5:
        if s[11] > 0.5:
            if s[33] <= p[36]:
                s[33] = s[33] + dt
                k = 0.0
            else:
                k = k / p[37]
        else:
            s[33] = max(s[33] - p[37] * dt, 0.0)
    if s[29] != 0.0:
        k = max(k, s[29])
        s[29] = s[29] / (s[29] + 1.0)
        if s[29] * p[38] < dt:
            s[29] = 0.0
    s[8] = wrap_pi(s[8] + k * phi)


@jitable
def recover(s: List[float]) -> None:
    """After a gap longer than the gap time: restart every low-pass (the almost-inertial frame lost the
    rotation of the gap), the rest detector, and the 1/n heading gain; keep the bias and its covariance.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
    """
    lowpass_reset(s, 40, 3)
    lowpass_reset(s, 53, 3)
    lowpass_reset(s, 66, 3)
    lowpass_reset(s, 79, 9)
    lowpass_reset(s, 116, 2)
    lowpass_reset(s, 125, 2)
    s[9] = 0.0
    s[10] = 0.0
    s[29] = 1.0


@jitable
def step(
    s: List[float],
    p: List[float],
    gx: float,
    gy: float,
    gz: float,
    ax: float,
    ay: float,
    az: float,
    mx: float,
    my: float,
    mz: float,
    use_mag: bool,
) -> None:
    """One sample: gyro [rad/s], acc [m/s²], mag [any unit, µT by convention] (ignored unless use_mag).

    A sample with a non-finite value is counted (s[24]); so is a gyro sample over 1000 rad/s (‖ω‖² > 1e6,
    beyond any gyroscope's range: a corrupt value, which would overflow the squares of the update to NaN).
    A missing gyro sample is bridged with the last bias-free rate for up to the gap time p[39] and grows the
    inclination uncertainty (:func:`gap_uncertainty`); after a longer gap the acc/mag updates pause and the
    first valid sample calls :func:`recover`.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        gx: gyro x [rad/s].
        gy: gyro y [rad/s].
        gz: gyro z [rad/s].
        ax: accelerometer x [m/s²].
        ay: accelerometer y [m/s²].
        az: accelerometer z [m/s²].
        mx: magnetometer x.
        my: magnetometer y.
        mz: magnetometer z.
        use_mag: run the magnetometer update.
    """
    gok = finite3(gx, gy, gz) and gx * gx + gy * gy + gz * gz <= 1.0e6
    aok = finite3(ax, ay, az)
    mok = finite3(mx, my, mz) or not use_mag
    if not (gok and aok and mok):
        s[24] = s[24] + 1.0
    if gok:
        if s[25] > p[39]:
            recover(s)
        s[25] = 0.0
        gyr_update(s, p, gx, gy, gz)
    else:
        s[25] = s[25] + p[0]
        bias_noise(s, p)
        if p[43] > 0.5:
            gap_uncertainty(s, p)
        if s[25] <= p[39]:
            integrate(s, s[26], s[27], s[28], p[0])
    if s[25] <= p[39]:
        if aok:
            acc_update(s, p, ax, ay, az)
        if use_mag and mok:
            mag_update(s, p, mx, my, mz)


@jitable
def output(s: List[float], use_mag: bool) -> Tuple[float, float, float, float]:
    """Unit quaternion with w ≥ 0: q_{E_i S} (6-axis) or q_{ES} = [cos δ/2, 0, 0, sin δ/2] ⊗ q_{E_i S}.

    Args:
        s: the state vector.
        use_mag: the 9-axis output q_{ES}.

    Returns:
        (w, x, y, z).
    """
    w, x, y, z = q6(s)
    if use_mag:
        c = math.cos(0.5 * s[8])
        sn = math.sin(0.5 * s[8])
        w, x, y, z = qmul(c, 0.0, 0.0, sn, w, x, y, z)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if w < 0.0:
        n = -n
    return (w / n, x / n, y / n, z / n)


@njit(cache=True)
def run_batch(gyr, acc, mag, use_mag, s, p, quat, bias, flags):  # pragma: no cover - numba-compiled
    """Offline path: :func:`step` over (N, 3) float64 arrays.

    Writes quat (N, 4), bias (N, 3) [rad/s] and flags (N,) int8 (bit 0 rest, bit 1 magnetic disturbance, bit 2
    sample skipped); s is updated in place.

    Args:
        gyr: gyro (N, 3) [rad/s].
        acc: accelerometer (N, 3) [m/s²].
        mag: magnetometer (N, 3) (read only with use_mag).
        use_mag: run the magnetometer update.
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        quat: output quaternions (N, 4), (w, x, y, z).
        bias: output gyro bias (N, 3) [rad/s].
        flags: output flags (N,) int8.
    """
    for k in range(gyr.shape[0]):
        before = s[24]
        if use_mag:
            step(
                s,
                p,
                gyr[k, 0],
                gyr[k, 1],
                gyr[k, 2],
                acc[k, 0],
                acc[k, 1],
                acc[k, 2],
                mag[k, 0],
                mag[k, 1],
                mag[k, 2],
                True,
            )
        else:
            step(s, p, gyr[k, 0], gyr[k, 1], gyr[k, 2], acc[k, 0], acc[k, 1], acc[k, 2], 0.0, 0.0, 0.0, False)
        q = output(s, use_mag)
        quat[k, 0] = q[0]
        quat[k, 1] = q[1]
        quat[k, 2] = q[2]
        quat[k, 3] = q[3]
        bias[k, 0] = s[12]
        bias[k, 1] = s[13]
        bias[k, 2] = s[14]
        f = 0
        if s[9] > 0.5:
            f += 1
        if s[11] > 0.5:
            f += 2
        if s[24] > before:
            f += 4
        flags[k] = f
