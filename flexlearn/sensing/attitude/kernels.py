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
from flexlearn.sensing.attitude.kernel_math import (
    butter_into,
    finite3,
    lowpass,
    lowpass_reset,
    qmul,
    qrot,
    store_unit,
    wrap_pi,
)

# numba's cache of run_batch does not see edits of the helpers it calls from kernel_math: one fingerprint over both
refresh_numba_cache(Path(__file__).parent, ("kernels",), "attitude_kernels", depends=("kernel_math",))

STATE_SIZE = 150
PARAM_SIZE = 46


@jitable
def q6(s: List[float]) -> Tuple[float, float, float, float]:
    """The 6-axis orientation q_{E_i S} = q_a ⊗ q_g.

    Args:
        s: the state vector (layout in the module docstring); returns q_{E_i S} as (w, x, y, z).
    """
    return qmul(s[4], s[5], s[6], s[7], s[0], s[1], s[2], s[3])


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
def kalman_bias(
    s: List[float], p: List[float], h: int, e0: float, e1: float, e2: float, w0: float, w1: float, w2: float
) -> None:
    """Kalman update of the bias b̂ (s[12:15]) and P (s[15:24]) with innovation e, model H = s[h:h+9].

    ``A = P Hᵀ,  S = H A + W,  K = A S⁻¹,  b̂ ← clip(b̂ + K clip(e)),  P ← P − K Aᵀ``, W = diag(w), clip ±p[21];
    S⁻¹ by adjugate / determinant. Written out on scalars (no loops, no scratch): the same arithmetic under
    numba and TorchScript, and a short instruction stream for the TorchScript interpreter.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        h: offset of H (3×3, row major) in s.
        e0: innovation e_0 [rad/s].
        e1: innovation e_1 [rad/s].
        e2: innovation e_2 [rad/s].
        w0: W_00 [(rad/s)²].
        w1: W_11 [(rad/s)²].
        w2: W_22 [(rad/s)²].
    """
    clip = p[21]
    e0 = min(max(e0, -clip), clip)
    e1 = min(max(e1, -clip), clip)
    e2 = min(max(e2, -clip), clip)
    p00, p01, p02, p10, p11, p12, p20, p21, p22 = s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23]
    h00, h01, h02 = s[h], s[h + 1], s[h + 2]
    h10, h11, h12 = s[h + 3], s[h + 4], s[h + 5]
    h20, h21, h22 = s[h + 6], s[h + 7], s[h + 8]
    a00 = p00 * h00 + p01 * h01 + p02 * h02  # A = P Hᵀ
    a01 = p00 * h10 + p01 * h11 + p02 * h12
    a02 = p00 * h20 + p01 * h21 + p02 * h22
    a10 = p10 * h00 + p11 * h01 + p12 * h02
    a11 = p10 * h10 + p11 * h11 + p12 * h12
    a12 = p10 * h20 + p11 * h21 + p12 * h22
    a20 = p20 * h00 + p21 * h01 + p22 * h02
    a21 = p20 * h10 + p21 * h11 + p22 * h12
    a22 = p20 * h20 + p21 * h21 + p22 * h22
    m00 = h00 * a00 + h01 * a10 + h02 * a20 + w0  # S = H A + W
    m01 = h00 * a01 + h01 * a11 + h02 * a21
    m02 = h00 * a02 + h01 * a12 + h02 * a22
    m10 = h10 * a00 + h11 * a10 + h12 * a20
    m11 = h10 * a01 + h11 * a11 + h12 * a21 + w1
    m12 = h10 * a02 + h11 * a12 + h12 * a22
    m20 = h20 * a00 + h21 * a10 + h22 * a20
    m21 = h20 * a01 + h21 * a11 + h22 * a21
    m22 = h20 * a02 + h21 * a12 + h22 * a22 + w2
    c00 = m11 * m22 - m12 * m21  # S⁻¹ = adj(S) / det(S)
    c10 = m12 * m20 - m10 * m22
    c20 = m10 * m21 - m11 * m20
    r = 1.0 / (m00 * c00 + m01 * c10 + m02 * c20)
    i00 = c00 * r
    i01 = (m02 * m21 - m01 * m22) * r
    i02 = (m01 * m12 - m02 * m11) * r
    i10 = c10 * r
    i11 = (m00 * m22 - m02 * m20) * r
    i12 = (m02 * m10 - m00 * m12) * r
    i20 = c20 * r
    i21 = (m01 * m20 - m00 * m21) * r
    i22 = (m00 * m11 - m01 * m10) * r
    k00 = a00 * i00 + a01 * i10 + a02 * i20  # K = A S⁻¹
    k01 = a00 * i01 + a01 * i11 + a02 * i21
    k02 = a00 * i02 + a01 * i12 + a02 * i22
    k10 = a10 * i00 + a11 * i10 + a12 * i20
    k11 = a10 * i01 + a11 * i11 + a12 * i21
    k12 = a10 * i02 + a11 * i12 + a12 * i22
    k20 = a20 * i00 + a21 * i10 + a22 * i20
    k21 = a20 * i01 + a21 * i11 + a22 * i21
    k22 = a20 * i02 + a21 * i12 + a22 * i22
    s[12] = min(max(s[12] + k00 * e0 + k01 * e1 + k02 * e2, -clip), clip)
    s[13] = min(max(s[13] + k10 * e0 + k11 * e1 + k12 * e2, -clip), clip)
    s[14] = min(max(s[14] + k20 * e0 + k21 * e1 + k22 * e2, -clip), clip)
    s[15] = p00 - (k00 * a00 + k01 * a01 + k02 * a02)  # P ← P − K Aᵀ
    s[16] = p01 - (k00 * a10 + k01 * a11 + k02 * a12)
    s[17] = p02 - (k00 * a20 + k01 * a21 + k02 * a22)
    s[18] = p10 - (k10 * a00 + k11 * a01 + k12 * a02)
    s[19] = p11 - (k10 * a10 + k11 * a11 + k12 * a12)
    s[20] = p12 - (k10 * a20 + k11 * a21 + k12 * a22)
    s[21] = p20 - (k20 * a00 + k21 * a01 + k22 * a02)
    s[22] = p21 - (k20 * a10 + k21 * a11 + k22 * a12)
    s[23] = p22 - (k20 * a20 + k21 * a21 + k22 * a22)


@jitable
def bias_noise(s: List[float], p: List[float]) -> None:
    """Random-walk process noise of the bias for one sample, P_ii += V, saturating at the initial variance.

    Also added for every sample of a gap: the bias keeps drifting while nothing is measured.

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
    """
    for i in range(3):
        if s[15 + 4 * i] < p[22]:
            s[15 + 4 * i] = s[15 + 4 * i] + p[23]


@jitable
def bias_update(s: List[float], p: List[float], ex: float, ey: float) -> None:
    """Gyro-bias Kalman filter at rest and in motion (VQF §3.3, restated).

    The rotation matrix R = R(q_{E_i S}) and the horizontal part of R b̂ are low-passed with the
    accelerometer filter (τ_acc) so that they see the same delay as the correction. At rest the measurement
    is the low-passed rate: ``y = LP(ω)``, H = I, W = w_rest I. In motion the inclination correction
    ``c = (a_y, −a_x)/Ts`` (a = normalised low-passed acc in E_i before the correction, ``ex, ey``) tells
    how much the drift R(b − b̂) was: ``y = LP(R b̂)_{xy} − c``, H = LP(R), W = diag(w_m, w_m, w_v) (the
    vertical row, ``y_z = 0``, has a weak weight so that the heading bias only slowly forgets). The motion
    update waits until the accelerometer low-pass has left its running-mean start-up (s[49] < 0): until then
    the corrections are the mean settling on the first samples, not drift; likewise after a gap while the
    inclination uncertainty σ_θ/τ_acc exceeds σ_b (the corrections are then the re-acquisition, not drift).

    Args:
        s: the state vector (layout in the module docstring), updated in place.
        p: the parameter vector (`offline.make_params`).
        ex: x of the correction's acc (normalised low-passed acc in E_i).
        ey: y of that acc.
    """
    w, x, y, z = q6(s)
    bx = s[12]
    by = s[13]
    bz = s[14]
    s[79] = 1.0 - 2.0 * (y * y + z * z)
    s[80] = 2.0 * (x * y - w * z)
    s[81] = 2.0 * (x * z + w * y)
    s[82] = 2.0 * (x * y + w * z)
    s[83] = 1.0 - 2.0 * (x * x + z * z)
    s[84] = 2.0 * (y * z - w * x)
    s[85] = 2.0 * (x * z - w * y)
    s[86] = 2.0 * (y * z + w * x)
    s[87] = 1.0 - 2.0 * (x * x + y * y)
    s[116] = s[79] * bx + s[80] * by + s[81] * bz
    s[117] = s[82] * bx + s[83] * by + s[84] * bz
    lowpass(s, 79, 9, s, 143, p[0])
    lowpass(s, 116, 2, s, 143, p[0])
    bias_noise(s, p)
    if s[9] > 0.5 and p[41] > 0.5:  # H = I (s[134:143], set by initial_state)
        kalman_bias(s, p, 134, s[53] - bx, s[54] - by, s[55] - bz, p[26], p[26], p[26])
    elif p[40] > 0.5 and s[49] < 0.0 and s[149] * s[149] <= max(s[15], max(s[19], s[23])) * p[6] * p[6]:
        t0 = s[79] * bx + s[80] * by + s[81] * bz
        t1 = s[82] * bx + s[83] * by + s[84] * bz
        t2 = s[85] * bx + s[86] * by + s[87] * bz
        kalman_bias(s, p, 79, -ey / p[0] + s[116] - t0, ex / p[0] + s[117] - t1, -t2, p[24], p[24], p[25])


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
