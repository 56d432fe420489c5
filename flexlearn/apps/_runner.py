"""Shared behaviour of the command-line applications: readable errors instead of stack traces."""
from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import Iterator

import flexlearn.config  # noqa: F401  (registers the OmegaConf resolvers the configs use: run_tag, relpath)
from flexlearn.errors import FlexlearnError

# flexlearn/conf/, found through the package, so an installed wheel works from any directory; a directory of
# your own is added with --config-dir. Absolute: console-script entry points would otherwise resolve a
# relative config_path as a Python module.
CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


@contextlib.contextmanager
def readable_errors(app: str) -> Iterator[None]:
    """Turn a `FlexlearnError` into one line on stderr and exit status 2."""
    try:
        yield
    except FlexlearnError as exc:
        print(f"{app}: error: {exc}", file=sys.stderr)
        sys.exit(2)


def sweep_value(value: float) -> float:
    """The value a sweeper minimises: a non-finite metric becomes +inf so it ranks last, not crashes."""
    return value if math.isfinite(value) else math.inf
