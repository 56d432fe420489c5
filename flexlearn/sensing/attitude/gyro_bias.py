"""Gyro-bias estimation of the attitude filter (VQF §3.3), written once for numba and TorchScript.

Called by :func:`~flexlearn.sensing.attitude.kernels.acc_update` (and, for the process noise of a gap, by the
kernels' step): a Kalman filter of the bias b̂ = s[12:15] [rad/s] with covariance P = s[15:24] [(rad/s)²] (3×3, row
major). At rest the measurement is the low-passed rate, ``y = LP(ω)``, H = I; in motion the inclination correction
``c = (a_y, −a_x)/Ts`` gives ``y = LP(R b̂)_{xy} − c``, H = LP(R), R = R(q_{E_i S}):

    A = P Hᵀ,  S = H A + W,  K = A S⁻¹,  b̂ ← clip(b̂ + K clip(e)),  P ← P − K Aᵀ.

``s`` and ``p`` are the filter's state and parameter vectors (layouts in the `kernels` module docstring and
:func:`flexlearn.sensing.attitude.offline.make_params`). Part of the attitude kernels' numba cache fingerprint
(``refresh_numba_cache`` in `kernels`).
"""

from typing import List

from flexlearn.optional_numba import jitable
from flexlearn.sensing.attitude.kernel_math import lowpass, q6

__all__ = ["bias_noise", "bias_update", "kalman_bias"]


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
