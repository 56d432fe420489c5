"""The direction network a `DirectionTask` trains, chosen by the ``model`` group's ``_target_`` (conf/model/*.yaml).

A model is a `torch.nn.Module` class inside flexlearn (`flexlearn.config.TARGET_PACKAGES`) with the methods of
`DirectionNet`; its constructor arguments are the other keys of the group, checked before any layer is allocated
(the class's ``validate_hparams`` when it has one, else its ``__init__`` parameter names). The task saves the
checked arguments together with the ``_target_`` as ``hyper_parameters.model`` of its checkpoints, so that
`flexlearn.tasks.checkpoints.load_direction_model` rebuilds whichever model was trained; a checkpoint without a
``_target_`` (written before models were chosen by config) holds a `LEGACY_TARGET`.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Protocol, cast

import torch
from torch import nn

from flexlearn.config import split_target
from flexlearn.errors import ConfigError

LEGACY_TARGET = "flexlearn.models.direction_mlp.DirectionMLP"  # the model of checkpoints that name none
NET_METHODS = ("forward", "raw_output", "direction", "fit_input_normalization")


class DirectionNet(Protocol):
    """What `DirectionTask` trains and the exporters script: ΔB (..., 3) [T] → unit parent axis (..., 3), or
    (0, 0, 0) where no direction is usable (the contract of `flexlearn.models.direction_mlp`)."""

    def __call__(self, delta_b: torch.Tensor) -> torch.Tensor: ...

    def raw_output(self, delta_b: torch.Tensor) -> torch.Tensor:
        """The network output y (..., 3) before normalisation (any length; non-finite if diverged).

        Args:
            delta_b: the field changes ΔB (..., 3) [T].

        Returns:
            y (..., 3).
        """
        ...

    def direction(self, y: torch.Tensor, delta_b: torch.Tensor) -> torch.Tensor:
        """Y / ‖y‖ (..., 3) where usable, exactly 0 where not.

        Args:
            y: the raw output (..., 3) (`raw_output`).
            delta_b: the field changes ΔB (..., 3) [T] it came from.

        Returns:
            Unit vectors (..., 3), or 0 rows.
        """
        ...

    def fit_input_normalization(self, delta_b: torch.Tensor) -> None:
        """Fit the input standardisation on the training fields (N, 3) [T].

        Args:
            delta_b: the training split's field changes (N, 3) [T].
        """
        ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The trainable parameters (`torch.nn.Module.parameters`).

        Args:
            recurse: whether to include those of the submodules.
        """
        ...


def model_spec(hp: Any, where: str = "model", default: Optional[str] = None) -> dict[str, Any]:
    """The ``model`` group (or a checkpoint's ``hyper_parameters.model``) checked, nothing built:
    ``{"_target_": <class path>, **constructor arguments}``. ``default`` is the target of a mapping without one
    (None: the ``_target_`` is required). Errors are `ConfigError`s naming ``where.<key>`` and the value.

    Args:
        hp: the mapping (or OmegaConf node) with ``_target_`` and the constructor arguments.
        where: its key path, for messages.
        default: the target when ``hp`` names none (None: required).

    Returns:
        The spec.

    Raises:
        ConfigError: a bad target, an unknown argument or bad value, or a class without the `DirectionNet` methods.
    """
    cls, args = split_target(hp, where, nn.Module, default)
    missing = [m for m in NET_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(
            f"config '{where}._target_' = {cls.__module__}.{cls.__qualname__}: not a direction model "
            f"(no {missing}; see flexlearn.tasks.direction_model.DirectionNet)"
        )
    return {"_target_": f"{cls.__module__}.{cls.__qualname__}", **args}


def build_model(spec: Mapping[str, Any], where: str = "model") -> nn.Module:
    """The module a checked `model_spec` describes (its ``_target_`` called with the other keys).

    Args:
        spec: a checked `model_spec`.
        where: its key path, for messages.

    Returns:
        The new model (untrained).

    Raises:
        ConfigError: the spec's class or arguments are refused.
    """
    cls, args = split_target(spec, where, nn.Module)
    return cls(**args)


def as_direction_net(model: nn.Module) -> DirectionNet:
    """``model`` seen through the `DirectionNet` protocol (its class was checked by `model_spec`).

    Args:
        model: a module built from a checked spec.

    Returns:
        ``model`` itself, typed as a `DirectionNet`.
    """
    return cast(DirectionNet, model)
