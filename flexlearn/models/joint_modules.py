"""One direction model trained on several modules at once, each with its own input map (seed 002, III-B3).

Seed 002 fits a per-receiver alignment Aᵢ (after the tumble's Wᵢ) so that one network serves every module. Here the
network and the alignments are learned *together* on sweeps of several modules (a dataset with a ``module`` column,
`flexlearn.data.dataset.merge_modules`):

    d̂_n = f(A_{k(n)} x_n),   x_n = W_{k(n)} ΔB_n (processing applied the module's tumble),
    L = mean_n (1 − d̂_nᵀ â_n) + (σ_fix² / 2N) Σ_k ‖θ_k / σ_θ‖²,

A_k = `flexlearn.sensing.module_cal.input_map` (θ_k, ``kind``): a rotation times a trace-free symmetric stretch
(8 parameters) or the rotation alone (3). 1 − cos ≈ ∠²/2, so with σ_fix the per-fix angular noise the loss is the
negative log posterior of `fit_input_map` summed over modules (up to the factor σ_fix² / N): the same prior toward
A = I pins the common map the shared network could otherwise absorb. The shared network ``f`` is a plain
`DirectionMLP`: a module it never saw is calibrated with `fit_input_map` exactly as for a one-module model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.config import check, did_you_mean, is_finite_number
from flexlearn.errors import ArgumentError
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.sensing.module_cal import input_map

__all__ = ["JointModuleModel", "JointTraining", "ModuleMaps", "check_map_options", "train_joint"]


MAP_KINDS = ("rotation", "linear")
MAP_KEYS = ("kind", "prior_rotation_deg", "prior_shape", "sigma_fix_deg")


def check_map_options(options: Mapping[str, Any], where: str = "task.module_maps") -> dict[str, Any]:
    """The per-module map options with defaults filled.

    Options: ``kind`` rotation|linear, priors ``prior_rotation_deg`` [deg] and ``prior_shape`` [-], per-fix noise
    ``sigma_fix_deg`` [deg].

    Args:
        options: the options given.
        where: the config path named in errors.

    Returns:
        The options with defaults filled (numbers as float).

    Raises:
        ConfigError: naming a bad key or value.
    """
    unknown = sorted(set(options) - set(MAP_KEYS))
    check(not unknown, where, unknown, f"unknown key(s){did_you_mean(unknown, MAP_KEYS)}; known keys: {list(MAP_KEYS)}")
    out = {"kind": "linear", "prior_rotation_deg": 3.0, "prior_shape": 0.03, "sigma_fix_deg": 0.5, **options}
    check(out["kind"] in MAP_KINDS, f"{where}.kind", out["kind"], f"expected one of {MAP_KINDS}")
    for key in MAP_KEYS[1:]:
        v = out[key]
        check(is_finite_number(v) and v > 0, f"{where}.{key}", v, "must be a positive finite number")
        out[key] = float(v)
    return out


class ModuleMaps(nn.Module):
    """Per-module input maps A_k = `input_map` (θ_k, ``kind``) with the Gaussian prior θ_k ~ N(0, σ_θ²)."""

    prior: Tensor  # buffer σ_θ (3 or 8,) of the prior on ``theta``

    def __init__(
        self, n_modules: int, kind: str = "linear", prior_rotation: float = math.radians(3.0), prior_shape: float = 0.03
    ) -> None:
        super().__init__()
        if kind not in MAP_KINDS or n_modules < 1:
            raise ArgumentError(f"ModuleMaps: kind {kind!r} (rotation|linear), n_modules {n_modules} (>= 1)")
        self.kind = kind
        n_par = 3 if kind == "rotation" else 8
        self.theta = nn.Parameter(torch.zeros(n_modules, n_par, dtype=torch.float64))
        self.register_buffer(
            "prior", torch.tensor([prior_rotation] * 3 + [prior_shape] * (n_par - 3), dtype=torch.float64)
        )

    def maps(self) -> Tensor:
        """A_k (K, 3, 3) of every training module."""
        return torch.stack([input_map(t, self.kind) for t in self.theta])

    def forward(self, delta_b: Tensor, module: Tensor) -> Tensor:
        """A_{k(n)} x_n (N, 3) in the dtype of ``delta_b`` [T].

        Args:
            delta_b: fields x_n (N, 3) [T].
            module: module index k(n) of each field (N,) int.

        Returns:
            The mapped fields (N, 3) [T].
        """
        a = self.maps()[module]
        return (a @ delta_b.to(a.dtype).unsqueeze(-1)).squeeze(-1).to(delta_b.dtype)

    def prior_term(self) -> Tensor:
        """½ Σ_k ‖θ_k / σ_θ‖²."""
        return 0.5 * ((self.theta / self.prior) ** 2).sum()


class JointModuleModel(nn.Module):
    """Shared `DirectionMLP` ``net`` + per-module maps ``maps`` (`ModuleMaps`)."""

    def __init__(
        self,
        n_modules: int,
        kind: str = "linear",
        prior_rotation: float = math.radians(3.0),
        prior_shape: float = 0.03,
        **mlp: Any,
    ) -> None:
        super().__init__()
        self.maps = ModuleMaps(n_modules, kind, prior_rotation, prior_shape)
        self.net = DirectionMLP(**mlp)

    @property
    def theta(self) -> nn.Parameter:
        """θ (K, 3 or 8) of the maps."""
        return self.maps.theta

    def forward(self, delta_b: Tensor, module: Tensor) -> Tensor:
        """Unit directions (N, 3) for calibrated fields ``delta_b`` (N, 3) [T] of modules ``module`` (N,) int.

        Args:
            delta_b: fields (N, 3) [T].
            module: module index of each field (N,) int.

        Returns:
            Unit directions (N, 3).
        """
        return self.net(self.maps(delta_b.to(self.net.input_mean.dtype), module))

    def prior_term(self) -> Tensor:
        """½ Σ_k ‖θ_k / σ_θ‖²."""
        return self.maps.prior_term()


@dataclass(frozen=True)
class JointTraining:
    """How `train_joint` trains: AdamW on the network (``weight_decay``) and the maps (none), cosine-annealed
    learning rate from ``lr`` to ``lr · lr_min_factor`` over ``epochs`` — the optimiser of
    `flexlearn.tasks.direction.DirectionTask`.

    Attributes:
        epochs: passes over the rows.
        batch: rows per step.
        lr: initial learning rate.
        weight_decay: AdamW weight decay of the network.
        lr_min_factor: final learning rate / ``lr``.
        sigma_fix: per-fix angular noise σ_fix [rad] weighing the prior of the maps.
        kind: the maps' kind, ``rotation`` or ``linear``.
        seed: seed of the weights and of the batch order.
        hidden: widths of the network's hidden layers (None: 128, 128, 128).
    """

    epochs: int = 40
    batch: int = 512
    lr: float = 3e-3
    weight_decay: float = 1e-5
    lr_min_factor: float = 0.02
    sigma_fix: float = math.radians(0.5)
    kind: str = "linear"
    seed: int = 7
    hidden: Optional[Sequence[int]] = None


def train_joint(
    delta_b: np.ndarray, label: np.ndarray, module: np.ndarray, options: JointTraining = JointTraining()
) -> JointModuleModel:
    """Train `JointModuleModel` on rows of several modules.

    Args:
        delta_b: (N, 3) calibrated fields [T].
        label: (N, 3) unit parent axes.
        module: (N,) int module index in [0, K).
        options: how to train (`JointTraining`).

    Returns:
        The trained model, in eval mode.
    """
    epochs, batch, lr, seed = options.epochs, options.batch, options.lr, options.seed
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(np.asarray(delta_b), dtype=torch.float32)
    y = torch.as_tensor(np.asarray(label), dtype=torch.float32)
    k = torch.as_tensor(np.asarray(module), dtype=torch.long)
    model = JointModuleModel(int(k.max()) + 1, options.kind, hidden=tuple(options.hidden or (128, 128, 128)))
    model.net.fit_input_normalization(x)
    opt = torch.optim.AdamW(
        [
            {"params": model.net.parameters(), "weight_decay": options.weight_decay},
            {"params": [model.theta], "weight_decay": 0.0},
        ],
        lr=lr,
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs), eta_min=lr * options.lr_min_factor)
    n, w_prior = x.shape[0], options.sigma_fix**2 / x.shape[0]  # × ½Σ‖θ/σ‖² (prior_term)
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=gen).split(batch):
            opt.zero_grad()
            pred = model(x[idx], k[idx])
            loss = (1.0 - (pred * y[idx]).sum(-1)).mean() + w_prior * model.prior_term()
            loss.backward()
            opt.step()
        sched.step()
    return model.eval()
