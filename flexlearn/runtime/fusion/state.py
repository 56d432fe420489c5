"""Types of the state buffers that `FusedEstimator` registers and its export twin `FusedEstimatorGraph` copies.

Declarations only (no values): both classes inherit them so that type checkers know each registered buffer is
a `Tensor` (``nn.Module.__getattr__`` is typed ``Tensor | Module``). Meanings and shapes are documented where
the buffers are registered (`flexlearn.runtime.fusion.estimator`).
"""
from torch import Tensor


class EstimatorStateTypes:
    """Buffer declarations shared by the estimator and its graph twin (see the module docstring)."""

    aw: Tensor
    e: Tensor
    flip: Tensor
    q_ref: Tensor
    v_ref: Tensor
    r0t: Tensor
    theta_applied: Tensor
    axis: Tensor
    rel_c: Tensor
    travel: Tensor
    travel_fix: Tensor
    has_ref: Tensor
    q_last: Tensor
    q_time: Tensor
    q_on: Tensor
    bias: Tensor
    c_bias: Tensor
    p_var: Tensor
    t_p: Tensor
    u_hat: Tensor
    points: Tensor
    height: Tensor
    flags: Tensor
    tmap: Tensor
    gain: Tensor
    chain: Tensor
    static_flags: Tensor
    base_flags: Tensor
    bad_now: Tensor
    nofix_flags: Tensor
    prev_raw: Tensor
    off_sum: Tensor
    off_cnt: Tensor
    base: Tensor
    base_ok: Tensor
    on_sum: Tensor
    on_cnt: Tensor
    mag_flags: Tensor
    t_fix: Tensor
    n_fixes: Tensor
    eye_n: Tensor
