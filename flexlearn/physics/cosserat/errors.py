"""Errors of the Cosserat rod package: every message names the node (or element) and the step."""

from __future__ import annotations

from typing import Any, Optional

from flexlearn.errors import ConfigError, FlexlearnError


class CosseratError(FlexlearnError):
    """Base class of the errors raised by :mod:`flexlearn.physics.cosserat`."""


class ArgumentError(CosseratError, ConfigError, ValueError):
    """A function argument is out of range (the message names it); also a ``ValueError`` and a ``ConfigError``."""


class IntegrationError(CosseratError):
    """A time step failed: the Newton solve on the Cayley map did not converge, a value became
    non-finite, or a strain left the physical range (the usual sign of a time step beyond stability).

    Args:
        message: the one-line description (node, step, cause, hint).
        step: index k of the step k → k+1 that failed.
        node: node (or element) index.
        rod: batch index of the rod.
        what: ``'node'``, ``'element'`` or ``'parameter'``: what ``node`` indexes.
        state: the state before the failing step.
        trajectory: the trajectory recorded up to that state.

    Attributes:
        step: index k of the step k → k+1 that failed.
        node: node index (or element index, see ``what``) where the failure was detected.
        rod: batch index of the rod.
        state: the :class:`~flexlearn.physics.cosserat.state.RodState` *before* the failing step.
        trajectory: the :class:`~flexlearn.physics.cosserat.state.Trajectory` recorded up to that state.
    """

    def __init__(
        self,
        message: str,
        *,
        step: int,
        node: int,
        rod: int = 0,
        what: str = "node",
        state: Optional[Any] = None,
        trajectory: Optional[Any] = None,
    ):
        super().__init__(message)
        self.step = step
        self.node = node
        self.rod = rod
        self.what = what
        self.state = state
        self.trajectory = trajectory
