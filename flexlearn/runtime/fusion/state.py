"""The one list of the state that `FusedEstimator` keeps and its export twin `FusedEstimatorGraph` copies.

`EstimatorStateTypes` declares the shared state buffers (no values): both classes inherit it so that type checkers
know each registered buffer is a `Tensor` (``nn.Module.__getattr__`` is typed ``Tensor | Module``), and
`ESTIMATOR_BUFFERS` is read from it (the estimator checks that it registered each, the graph copies each).
`ESTIMATOR_SCALARS` names the estimator's Python-scalar state that the graph keeps as 0-d buffers. Meanings and
shapes are documented where the buffers are registered (`flexlearn.runtime.fusion.estimator`).
"""

from typing import Dict, Tuple

import torch
from torch import Tensor

__all__ = ["EstimatorStateTypes", "ESTIMATOR_BUFFERS", "ESTIMATOR_SCALARS"]


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


ESTIMATOR_BUFFERS: Tuple[str, ...] = tuple(EstimatorStateTypes.__annotations__)
ESTIMATOR_SCALARS: Dict[str, torch.dtype] = {
    "t_att": torch.float64,
    "t_all_ok": torch.float64,
    "nofix_next": torch.float64,
    "nofix_any": torch.bool,
    "mag_flagged": torch.bool,
    "coil": torch.int64,
    "t_switch": torch.float64,
    "t_mag": torch.float64,
    "t_off": torch.float64,
    "resync_until": torch.float64,
}
