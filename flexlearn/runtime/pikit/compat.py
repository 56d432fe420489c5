"""Which torch loads a bundle: the TorchScript files flexlearn writes load with torch `TORCH_MIN` or newer.

Checked by loading the exported kit with torch 2.9.1 (PyPI's CPU wheel for aarch64, Python 3.11, the newest a
Raspberry Pi gets from PyPI) under `scripts/pi_emulated_check.sh`, and with the exporting torch (2.13). A loader on
an older torch refuses with one line naming both versions (`check_torch`). Standard library only.
"""

from __future__ import annotations

import re
from typing import Optional

from .family import ConfigError as _FamilyBase  # flexlearn's error family inside flexlearn

TORCH_MIN = (2, 9)  # oldest torch that loads the TorchScript bundles (tested: 2.9.1 aarch64)
TESTED = ("2.9.1", "2.13.0")
# TorchScript builtins that older torch does not know, as they appear in a saved archive's code/ → first torch with them
NEWER_OPS = {"torch.broadcast_shapes(": (2, 13)}


class TorchVersionError(_FamilyBase, ValueError):  # type: ignore[valid-type,misc]
    """This torch cannot load the bundle: the message names both versions."""


def parse_version(text: str) -> Optional[tuple]:
    """``"2.13.0+cpu"`` → (2, 13, 0); None when ``text`` is not a version.

    Args:
        text: a version string (a missing patch number reads as 0).

    Returns:
        (major, minor, patch), or None.
    """
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def required_torch(code: str) -> tuple:
    """The oldest torch (major, minor) that knows every builtin of a TorchScript archive's ``code`` (its text).

    Args:
        code: the archive's ``code/*.py`` entries, concatenated.

    Returns:
        `TORCH_MIN`, or later where the code calls a builtin of `NEWER_OPS`.
    """
    return max([TORCH_MIN] + [v for op, v in NEWER_OPS.items() if op in code])


def supported_range(minimum: tuple = TORCH_MIN) -> str:
    """The torch versions that load the bundles, in words (the kit's README and kit.json).

    Args:
        minimum: the oldest torch (major, minor) that loads them.

    Returns:
        ``"torch >= X.Y (tested with ...)"``, naming the tested versions not older than ``minimum``.
    """
    tested = [t for t in TESTED if (parse_version(t) or (0, 0))[:2] >= minimum[:2]]
    return f"torch >= {minimum[0]}.{minimum[1]} (tested with {', '.join(tested)})"


def check_torch(running: str, exported_by: Optional[str], path: str) -> None:
    """Refuse to load ``path`` with torch ``running`` when it is older than `TORCH_MIN`.

    Args:
        running: ``torch.__version__`` here.
        exported_by: the torch that wrote the file (its metadata), named in the message.
        path: the model file.

    Raises:
        TorchVersionError: one line naming the file and both versions.
    """
    have = parse_version(running)
    if have is not None and have[:2] < TORCH_MIN:
        raise TorchVersionError(
            f"model file '{path}': written by torch {exported_by or 'unknown'}, loads with {supported_range()}; "
            f"this is torch {running}: install torch>={TORCH_MIN[0]}.{TORCH_MIN[1]}"
        )
