"""Errors that name the problem: the file, the field and the value at fault."""

from __future__ import annotations


class FlexlearnError(Exception):
    """Base class of every error flexlearn raises on bad input; applications print it without a traceback."""


class DataError(FlexlearnError):
    """A recording, raw stream or dataset is malformed (missing field, wrong unit, NaN, too few samples)."""


class ConfigError(FlexlearnError):
    """A configuration key is unknown or a value is out of range."""


class CheckpointError(FlexlearnError):
    """A checkpoint or exported model is missing, corrupt or of an incompatible schema."""


class ArgumentError(FlexlearnError, ValueError):
    """A function or constructor was given a value outside its domain: a wrong shape, an unknown option name, a
    size out of range. Also a `ValueError`, as Python callers expect of a bad argument (`except ValueError` keeps
    working); a config that passes such a value reaches the user as a `ConfigError` naming the key."""
