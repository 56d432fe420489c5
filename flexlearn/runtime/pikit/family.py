"""Roots of the error family for the kit's modules.

Inside flexlearn (``flexlearn.runtime.pikit``) they are flexlearn's own errors, so the applications print them as
one line (exit status 2); in the kit's top-level copy, where the relative import cannot reach a parent package,
they are stand-ins derived from `Exception` (the modules add `ValueError` themselves).
"""

try:  # inside flexlearn: the errors join its family
    from ...errors import CheckpointError, ConfigError, DataError
except ImportError:  # the kit's top-level package ``pikit``: no parent package, no flexlearn

    class CheckpointError(Exception):  # type: ignore[no-redef]
        """Stand-in: a model file that cannot be trusted or loaded."""

    class ConfigError(Exception):  # type: ignore[no-redef]
        """Stand-in: a setting or side file out of range."""

    class DataError(Exception):  # type: ignore[no-redef]
        """Stand-in: a frame or record that cannot be read."""


__all__ = ["CheckpointError", "ConfigError", "DataError"]
