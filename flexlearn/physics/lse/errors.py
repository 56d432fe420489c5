"""The errors of the LSE statics, in one place; every one derives from :class:`flexlearn.errors.FlexlearnError`
(applications print it as one line, without a traceback)."""

from __future__ import annotations

from flexlearn.errors import FlexlearnError

__all__ = ["ConvergenceError", "IdentificationError", "PoseStaticsError", "ShootingError", "StaticsInputError"]


class StaticsInputError(FlexlearnError, ValueError):
    """An argument of an LSE statics call is malformed (shape, finiteness, range); the message names it.

    Also a ``ValueError``, so that callers catching ``ValueError`` keep working.
    """


class ConvergenceError(FlexlearnError):
    """Newton did not converge: carries the last scaled residual norm and the iteration count.

    Args:
        message: What failed.
        residual_norm: The last scaled residual ∞-norm (dimensionless, relative to the load scale).
        iterations: Newton iterations taken in all.
        residual_log: Every scaled residual norm of the solve, in order.
    """

    def __init__(self, message: str, residual_norm: float, iterations: int, residual_log: list[float]):
        super().__init__(f"{message} (scaled residual {residual_norm:.3e} after {iterations} iterations)")
        self.residual_norm = residual_norm
        self.iterations = iterations
        self.residual_log = residual_log


class IdentificationError(FlexlearnError):
    """Stiffness identification failed (bad data or no convergence)."""


class PoseStaticsError(FlexlearnError):
    """Inverse pose statics did not converge (the pose index and iteration count are in the message)."""


class ShootingError(FlexlearnError):
    """The shooting root finder did not converge (carries the residual norm and iteration count).

    Args:
        message: What failed.
        residual_norm: The last residual norm of the shooting problem.
        iterations: Root-finder iterations taken.
    """

    def __init__(self, message: str, residual_norm: float, iterations: int):
        super().__init__(f"{message} (residual {residual_norm:.3e} after {iterations} iterations)")
        self.residual_norm = residual_norm
        self.iterations = iterations
