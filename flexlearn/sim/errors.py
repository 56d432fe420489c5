"""The simulators' error for bad arguments: one class of the `flexlearn.errors.FlexlearnError` family."""

from __future__ import annotations

from flexlearn.errors import ConfigError

__all__ = ["SimConfigError"]


class SimConfigError(ConfigError, ValueError):
    """A simulator argument is unknown or out of range (a scenario name, a count, a derivative order).

    A `ConfigError`, so applications print it as one line; also a `ValueError`, so callers that caught the plain
    `ValueError` these arguments raised before keep working.
    """
