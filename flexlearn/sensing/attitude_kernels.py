"""Per-sample kernels of the attitude filter, written once for two compilers: numba and TorchScript.

Every function here works on plain floats, a state vector ``s`` and a parameter vector ``p`` (a float64
``numpy`` array under numba, a ``List[float]`` under TorchScript), so the offline path
(:func:`run_batch`, compiled with numba) and the runtime step (:class:`~flexlearn.sensing.attitude_step.
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
    134-178 scratch for the 3×3 Kalman update

Parameter layout ``p``: built by :func:`flexlearn.sensing.attitude_filter.make_params` (``PARAM_SIZE``).
"""
import math
from typing import List, Tuple


try:  # numba is optional: without it the same functions run as (slow) Python
    from numba import njit
    from numba.extending import register_jitable as jitable
    HAVE_NUMBA = True
except Exception:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False

    def jitable(fn):
        return fn

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f

STATE_SIZE = 179
PARAM_SIZE = 44


@jitable
def qmul(aw: float, ax: float, ay: float, az: float,
         bw: float, bx: float, by: float, bz: float) -> Tuple[float, float, float, float]:
    """Hamilton product a ⊗ b."""
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


@jitable
def qrot(w: float, x: float, y: float, z: float, vx: float, vy: float, vz: float) -> Tuple[float, float, float]:
    """R(q) v = v + 2w (u × v) + 2 u × (u × v), u = (x, y, z)."""
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx)


@jitable
def q6(s: List[float]) -> Tuple[float, float, float, float]:
    """The 6-axis orientation q_{E_i S} = q_a ⊗ q_g."""
    return qmul(s[4], s[5], s[6], s[7], s[0], s[1], s[2], s[3])


@jitable
def store_unit(s: List[float], o: int, w: float, x: float, y: float, z: float) -> None:
    """s[o:o+4] ← q / ‖q‖."""
    n = math.sqrt(w * w + x * x + y * y + z * z)
    s[o] = w / n
    s[o + 1] = x / n
    s[o + 2] = y / n
    s[o + 3] = z / n


@jitable
def lowpass(s: List[float], o: int, n: int, p: List[float], c: int) -> None:
    """Second-order Butterworth low-pass of the n values at s[o:o+n], in place (input → output).

    Transposed direct form II with coefficients ``p[c:c+5] = (b0, b1, b2, a1, a2)``:
    ``y = b0 x + z0;  z0 ← b1 x − a1 y + z1;  z1 ← b2 x − a2 y``. Start-up (count s[o+3n] ≥ 0): the output is
    the running mean of the inputs until ``count·Ts ≥ τ = p[c+5]``, then the states are set to the steady
    state of that mean (``z0 = m(1 − b0)``, ``z1 = m(b2 − a2)``) and the filter runs (count −1).
    """
    m = o + 3 * n
    cnt = s[m]
    if cnt >= 0.0:
        cnt = cnt + 1.0
        s[m] = cnt
        for i in range(n):
            s[m + 1 + i] = s[m + 1 + i] + s[o + i]
            s[o + i] = s[m + 1 + i] / cnt
        if cnt * p[0] >= p[c + 5]:
            for i in range(n):
                y = s[o + i]
                s[o + n + i] = y * (1.0 - p[c])
                s[o + 2 * n + i] = y * (p[c + 2] - p[c + 4])
            s[m] = -1.0
        return
    b0 = p[c]
    b1 = p[c + 1]
    b2 = p[c + 2]
    a1 = p[c + 3]
    a2 = p[c + 4]
    for i in range(n):
        x = s[o + i]
        y = b0 * x + s[o + n + i]
        s[o + n + i] = b1 * x - a1 * y + s[o + 2 * n + i]
        s[o + 2 * n + i] = b2 * x - a2 * y
        s[o + i] = y


@jitable
def lowpass_reset(s: List[float], o: int, n: int) -> None:
    """Restart the running-mean start-up of the low-pass block at o (after a gap)."""
    m = o + 3 * n
    s[m] = 0.0
    for i in range(n):
        s[m + 1 + i] = 0.0


@jitable
def integrate(s: List[float], wx: float, wy: float, wz: float, dt: float) -> None:
    """Strapdown: q_g ← q_g ⊗ [cos(‖ω‖dt/2), sin(‖ω‖dt/2) ω/‖ω‖] (exact for a constant rate over dt)."""
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
    """
    s[53] = gx
    s[54] = gy
    s[55] = gz
    lowpass(s, 53, 3, p, 7)
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
def inv3(s: List[float], a: int, o: int) -> None:
    """s[o:o+9] ← inverse of the 3×3 matrix s[a:a+9] (adjugate / determinant)."""
    m00 = s[a]
    m01 = s[a + 1]
    m02 = s[a + 2]
    m10 = s[a + 3]
    m11 = s[a + 4]
    m12 = s[a + 5]
    m20 = s[a + 6]
    m21 = s[a + 7]
    m22 = s[a + 8]
    c00 = m11 * m22 - m12 * m21
    c10 = m12 * m20 - m10 * m22
    c20 = m10 * m21 - m11 * m20
    r = 1.0 / (m00 * c00 + m01 * c10 + m02 * c20)
    s[o] = c00 * r
    s[o + 1] = (m02 * m21 - m01 * m22) * r
    s[o + 2] = (m01 * m12 - m02 * m11) * r
    s[o + 3] = c10 * r
    s[o + 4] = (m00 * m22 - m02 * m20) * r
    s[o + 5] = (m02 * m10 - m00 * m12) * r
    s[o + 6] = c20 * r
    s[o + 7] = (m01 * m20 - m00 * m21) * r
    s[o + 8] = (m00 * m11 - m01 * m10) * r


@jitable
def kalman_bias(s: List[float], p: List[float], h: int, e0: float, e1: float, e2: float,
                w0: float, w1: float, w2: float) -> None:
    """Kalman update of the bias b̂ (s[12:15]) and P (s[15:24]) with innovation e, model H = s[h:h+9].

    ``K = P Hᵀ (W + H P Hᵀ)⁻¹,  b̂ ← clip(b̂ + K clip(e)),  P ← P − K (P Hᵀ)ᵀ``, W = diag(w); clip ±p[21].
    """
    clip = p[21]
    e0 = min(max(e0, -clip), clip)
    e1 = min(max(e1, -clip), clip)
    e2 = min(max(e2, -clip), clip)
    for i in range(3):  # PHt (143) = P Hᵀ
        for j in range(3):
            s[143 + 3 * i + j] = (s[15 + 3 * i] * s[h + 3 * j] + s[16 + 3 * i] * s[h + 3 * j + 1]
                                  + s[17 + 3 * i] * s[h + 3 * j + 2])
    for i in range(3):  # S (152) = H PHt + W
        for j in range(3):
            s[152 + 3 * i + j] = (s[h + 3 * i] * s[143 + j] + s[h + 3 * i + 1] * s[146 + j]
                                  + s[h + 3 * i + 2] * s[149 + j])
    s[152] = s[152] + w0
    s[156] = s[156] + w1
    s[160] = s[160] + w2
    inv3(s, 152, 161)
    for i in range(3):  # K (170) = PHt S⁻¹
        for j in range(3):
            s[170 + 3 * i + j] = (s[143 + 3 * i] * s[161 + j] + s[144 + 3 * i] * s[164 + j]
                                  + s[145 + 3 * i] * s[167 + j])
    for i in range(3):
        b = s[12 + i] + s[170 + 3 * i] * e0 + s[171 + 3 * i] * e1 + s[172 + 3 * i] * e2
        s[12 + i] = min(max(b, -clip), clip)
    for i in range(3):  # P ← P − K PHtᵀ
        for j in range(3):
            s[15 + 3 * i + j] = s[15 + 3 * i + j] - (s[170 + 3 * i] * s[143 + 3 * j] + s[171 + 3 * i] * s[144 + 3 * j]
                                                     + s[172 + 3 * i] * s[145 + 3 * j])


@jitable
def bias_update(s: List[float], p: List[float], ex: float, ey: float) -> None:
    """Gyro-bias Kalman filter at rest and in motion (VQF §3.3, restated).

    The rotation matrix R = R(q_{E_i S}) and the horizontal part of R b̂ are low-passed with the
    accelerometer filter (τ_acc) so that they see the same delay as the correction. At rest the measurement
    is the low-passed rate: ``y = LP(ω)``, H = I, W = w_rest I. In motion the inclination correction
    ``c = (a_y, −a_x)/Ts`` (a = normalised low-passed acc in E_i before the correction, ``ex, ey``) tells
    how much the drift R(b − b̂) was: ``y = LP(R b̂)_{xy} − c``, H = LP(R), W = diag(w_m, w_m, w_v) (the
    vertical row, ``y_z = 0``, has a weak weight so that the heading bias only slowly forgets).
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
    lowpass(s, 79, 9, p, 1)
    lowpass(s, 116, 2, p, 1)
    for i in range(3):  # random-walk process noise, saturating at the initial variance
        if s[15 + 4 * i] < p[22]:
            s[15 + 4 * i] = s[15 + 4 * i] + p[23]
    if s[9] > 0.5 and p[41] > 0.5:
        for i in range(9):
            s[134 + i] = 0.0
        s[134] = 1.0
        s[138] = 1.0
        s[142] = 1.0
        kalman_bias(s, p, 134, s[53] - bx, s[54] - by, s[55] - bz, p[26], p[26], p[26])
    elif p[40] > 0.5:
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
    """
    if ax == 0.0 and ay == 0.0 and az == 0.0:
        return
    s[66] = ax
    s[67] = ay
    s[68] = az
    lowpass(s, 66, 3, p, 7)
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
    lowpass(s, 40, 3, p, 1)
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
def wrap_pi(a: float) -> float:
    """Angle wrapped into [−π, π]."""
    if a > math.pi:
        return a - 2.0 * math.pi
    if a < -math.pi:
        return a + 2.0 * math.pi
    return a


@jitable
def mag_update(s: List[float], p: List[float], mx: float, my: float, mz: float) -> None:
    """Heading δ from the magnetometer (VQF §3.4): ``m_E = R(q_{E_i S}) m``, disagreement
    ``φ = atan2(m_E,x, m_E,y) − δ`` (wrapped), ``δ ← δ + k φ`` with ``k = 1 − exp(−Ts/τ_mag)``; k = 0 while a
    disturbance is detected (up to t_rej, then k/f_rej), and k ≥ 1/n for the first samples (fast start).
    Only δ changes: the magnetometer never touches the inclination.
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
            lowpass(s, 125, 2, p, 13)
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
def finite3(x: float, y: float, z: float) -> bool:
    """All three finite (x − x is NaN for NaN and ±inf)."""
    return x - x == 0.0 and y - y == 0.0 and z - z == 0.0


@jitable
def recover(s: List[float]) -> None:
    """After a gap longer than the gap time: restart every low-pass (the almost-inertial frame lost the
    rotation of the gap), the rest detector, and the 1/n heading gain; keep the bias and its covariance."""
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
def step(s: List[float], p: List[float], gx: float, gy: float, gz: float, ax: float, ay: float, az: float,
         mx: float, my: float, mz: float, use_mag: bool) -> None:
    """One sample: gyro [rad/s], acc [m/s²], mag [any unit, µT by convention] (ignored unless use_mag).

    A sample with a non-finite value is counted (s[24]). A missing gyro sample is bridged with the last
    bias-free rate for up to the gap time p[39]; after a longer gap the acc/mag updates pause and the first
    valid sample calls :func:`recover`.
    """
    gok = finite3(gx, gy, gz)
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
        if s[25] <= p[39]:
            integrate(s, s[26], s[27], s[28], p[0])
    if s[25] <= p[39]:
        if aok:
            acc_update(s, p, ax, ay, az)
        if use_mag and mok:
            mag_update(s, p, mx, my, mz)


@jitable
def output(s: List[float], use_mag: bool) -> Tuple[float, float, float, float]:
    """Unit quaternion with w ≥ 0: q_{E_i S} (6-axis) or q_{ES} = [cos δ/2, 0, 0, sin δ/2] ⊗ q_{E_i S}."""
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
    """Offline path: :func:`step` over (N, 3) float64 arrays; writes quat (N, 4), bias (N, 3) [rad/s] and
    flags (N,) int8 (bit 0 rest, bit 1 magnetic disturbance, bit 2 sample skipped); s is updated in place."""
    for k in range(gyr.shape[0]):
        before = s[24]
        if use_mag:
            step(s, p, gyr[k, 0], gyr[k, 1], gyr[k, 2], acc[k, 0], acc[k, 1], acc[k, 2],
                 mag[k, 0], mag[k, 1], mag[k, 2], True)
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
