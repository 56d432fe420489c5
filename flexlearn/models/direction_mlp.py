"""The magnetic-field-to-direction network of seed 002, §III-B1.

f(ΔB) maps the parent coil's field at the child magnetometer, ΔB in tesla in the child sensor frame,
to the parent axis as a unit vector in the same frame. The input normalisation is part of the model
(seed 002: "f ... includes input normalization, which removes multiplicative field-amplitude
variation"), so it travels with the exported file:

    x = ΔB / max(‖ΔB‖, ε)                 (amplitude removed: units and coil current drop out)
    z = (x − μ) / σ                       (per-axis standardisation fitted on the training split)
    y = MLP(z)                            (raw output, any length)
    f = y / ‖y‖   if usable, else (0, 0, 0)

Output contract (what a deploying user checks): every output row is either a unit vector or exactly
the zero vector. The zero vector means "no usable direction": the input is non-finite or has no
amplitude (‖ΔB‖ ≤ ε), or the network's raw output is non-finite or shorter than `OUTPUT_FLOOR` (a
collapsed or diverged network). Test ``torch.linalg.vector_norm(f, dim=-1) > 0.5`` before using ``f``;
`usable` does exactly that. The module is scriptable (`torch.jit.script`, also after `torch.jit.freeze`)
and exportable with `torch.export`; the contract holds in all three forms.

Hyper-parameters are validated (names, types, bounded sizes) by `validate_hparams` *before* any layer
is allocated, so a checkpoint or config asking for a 10¹²-wide layer fails with a message, not an
allocation.
"""

import math
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from flexlearn.errors import ArgumentError

_ACTIVATIONS = {"silu": nn.SiLU, "tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}
HPARAM_KEYS = ("hidden", "activation", "amplitude_eps")
MAX_WIDTH = 16_384  # widest hidden layer accepted
MAX_LAYERS = 32  # most hidden layers accepted
MAX_PARAMETERS = 50_000_000  # most weights + biases accepted (200 MB in float32)
OUTPUT_FLOOR = 1e-6  # raw outputs shorter than this have no usable direction


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_hparams(hp: Mapping[str, Any], where: str = "model") -> dict[str, Any]:
    """Check the constructor arguments of `DirectionMLP` without building it; return them as a plain dict.

    ``hidden`` 1–`MAX_LAYERS` integer widths in 1–`MAX_WIDTH` with at most `MAX_PARAMETERS` parameters in all,
    ``activation`` one of the known names, ``amplitude_eps`` a positive finite number [T].

    Args:
        hp: the hyperparameters (keys ``hidden``, ``activation``, ``amplitude_eps``; missing ones get defaults).
        where: the config path named in errors.

    Returns:
        The hyperparameters with defaults filled, as a plain dict.

    Raises:
        ArgumentError: ``"<where>.<key> = <value>: <requirement>"`` for an unknown key, a wrong type or an
            out-of-range value.
    """
    if not isinstance(hp, Mapping):
        raise ArgumentError(f"{where} = {hp!r}: expected a mapping of {list(HPARAM_KEYS)}")
    unknown = sorted(set(hp) - set(HPARAM_KEYS))
    if unknown:
        raise ArgumentError(f"{where}: unknown key(s) {unknown}; known keys: {list(HPARAM_KEYS)}")
    hidden = hp.get("hidden", [128, 128, 128])
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
        raise ArgumentError(f"{where}.hidden = {hidden!r}: expected a list of layer widths")
    out = {
        "hidden": list(hidden),
        "activation": hp.get("activation", "silu"),
        "amplitude_eps": hp.get("amplitude_eps", 1e-12),
    }
    hidden = out["hidden"]
    if not 1 <= len(hidden) <= MAX_LAYERS or not all(_is_int(h) and 1 <= h <= MAX_WIDTH for h in hidden):
        raise ArgumentError(
            f"{where}.hidden = {hidden!r}: expected 1 to {MAX_LAYERS} integer widths, each in 1..{MAX_WIDTH}"
        )
    widths = [3, *hidden, 3]
    n_params = sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:]))
    if n_params > MAX_PARAMETERS:
        raise ArgumentError(
            f"{where}.hidden = {hidden!r}: {n_params} parameters, more than the {MAX_PARAMETERS} accepted"
        )
    if not isinstance(out["activation"], str) or out["activation"] not in _ACTIVATIONS:
        raise ArgumentError(f"{where}.activation = {out['activation']!r}: expected one of {sorted(_ACTIVATIONS)}")
    eps = out["amplitude_eps"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps > 0):
        raise ArgumentError(f"{where}.amplitude_eps = {eps!r}: expected a positive finite number [T]")
    out["amplitude_eps"] = float(eps)
    return out


class DirectionMLP(nn.Module):
    """ΔB (..., 3) [T] → unit direction (..., 3), or (0, 0, 0) where no direction is usable (module docstring)."""

    # buffers μ, σ (3,) of the input standardisation (runtime annotations, no ``from __future__ import
    # annotations``: TorchScript reads them)
    input_mean: torch.Tensor
    input_std: torch.Tensor
    # the constructor-argument check flexlearn.config.target_arguments runs before a config or checkpoint builds it
    validate_hparams = staticmethod(validate_hparams)

    def __init__(
        self, hidden: Sequence[int] = (128, 128, 128), activation: str = "silu", amplitude_eps: float = 1e-12
    ) -> None:
        super().__init__()
        hp = validate_hparams({"hidden": hidden, "activation": activation, "amplitude_eps": amplitude_eps})
        layers: list[nn.Module] = []
        width = 3
        for h in hp["hidden"]:
            layers += [nn.Linear(width, h), _ACTIVATIONS[activation]()]
            width = h
        layers.append(nn.Linear(width, 3))
        self.net = nn.Sequential(*layers)
        self.amplitude_eps = hp["amplitude_eps"]
        self.output_floor = OUTPUT_FLOOR
        self.register_buffer("input_mean", torch.zeros(3))
        self.register_buffer("input_std", torch.ones(3))

    @staticmethod
    def unit_field(delta_b: torch.Tensor, eps: float) -> torch.Tensor:
        """ΔB / max(‖ΔB‖, eps): the amplitude-free field direction, shape (..., 3).

        Args:
            delta_b: fields ΔB (..., 3) [T].
            eps: amplitude floor [T].

        Returns:
            The direction (..., 3).
        """
        return delta_b / torch.linalg.vector_norm(delta_b, dim=-1, keepdim=True).clamp_min(eps)

    @torch.jit.ignore
    def fit_input_normalization(self, delta_b: torch.Tensor) -> None:
        """Set μ, σ from training fields (N, 3), N ≥ 2; σ is floored to keep the scaling finite.

        Args:
            delta_b: training fields ΔB (N, 3) [T], N ≥ 2.
        """
        x = self.unit_field(delta_b.to(self.input_mean.dtype), self.amplitude_eps)
        self.input_mean.copy_(x.mean(dim=0))
        self.input_std.copy_(x.std(dim=0).clamp_min(1e-6))

    def raw_output(self, delta_b: torch.Tensor) -> torch.Tensor:
        """The network's output y (..., 3) before normalisation (any length; non-finite if diverged).

        Args:
            delta_b: fields ΔB (..., 3) [T] in the child sensor frame.

        Returns:
            The raw output y (..., 3).
        """
        x = self.unit_field(delta_b.to(self.input_mean.dtype), self.amplitude_eps)
        return self.net((x - self.input_mean) / self.input_std)

    def direction(self, y: torch.Tensor, delta_b: torch.Tensor) -> torch.Tensor:
        """Y / ‖y‖ (..., 3) where usable, exactly 0 where not (see the module docstring's contract).

        Args:
            y: the network's raw output (..., 3).
            delta_b: the input fields (..., 3) [T]; usable only where ‖ΔB‖ > ``amplitude_eps``.

        Returns:
            Unit directions (..., 3), 0 where ‖y‖ or ‖ΔB‖ is not finite, ‖y‖ < ``output_floor`` or
            ‖ΔB‖ ≤ ``amplitude_eps``.
        """
        d = delta_b.to(y.dtype)
        n = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
        amp = torch.linalg.vector_norm(d, dim=-1, keepdim=True)
        ok = torch.isfinite(n) & (n >= self.output_floor) & torch.isfinite(amp) & (amp > self.amplitude_eps)
        unit = y / n.clamp_min(self.output_floor)
        return torch.where(ok, unit, torch.zeros_like(unit))

    def forward(self, delta_b: torch.Tensor) -> torch.Tensor:
        """The parent axis f(ΔB): a unit direction, or (0, 0, 0) where none is usable (module docstring).

        Args:
            delta_b: fields ΔB (..., 3) [T] in the child sensor frame.

        Returns:
            Unit directions (..., 3), exactly 0 where no direction is usable.
        """
        return self.direction(self.raw_output(delta_b), delta_b)


def usable(direction: torch.Tensor) -> torch.Tensor:
    """Mask (...) of the rows of a `DirectionMLP` output (..., 3) that carry a direction (unit, not zero).

    Args:
        direction: output rows (..., 3) of a `DirectionMLP`.

    Returns:
        Boolean mask (...), True where the row has norm > 0.5.
    """
    return torch.linalg.vector_norm(direction, dim=-1) > 0.5
