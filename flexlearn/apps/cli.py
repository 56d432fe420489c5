"""`flexlearn`: the package's version and its commands (`flexlearn --version`, `flexlearn --help`).

Imports neither torch nor Lightning, so it answers at once.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from importlib import metadata
from typing import Optional

import flexlearn
from flexlearn.apps.launch import app_module

SUMMARY_CHARS = 200
"""Longest command summary listed; a longer first sentence ends in '…' at a word boundary."""


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined (a period followed by a capital letter,
    a backtick or the end; ``eq. (39)`` does not end one), at most `SUMMARY_CHARS` characters.

    Args:
        doc: the docstring.

    Returns:
        The sentence.
    """
    text = " ".join(line.strip() for line in doc.strip().split("\n\n")[0].splitlines())
    end = re.search(r"[.!?](?=\s+[A-Z`]|$)", text)
    sentence = text[: end.end()] if end else text
    if len(sentence) > SUMMARY_CHARS:
        sentence = sentence[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return sentence


def commands() -> dict[str, str]:
    """Console scripts of the installed package: name → one-line summary (the app module's docstring)."""
    out = {}
    try:
        eps = [ep for ep in metadata.entry_points(group="console_scripts") if ep.value.startswith("flexlearn.apps.")]
    except Exception:  # pragma: no cover - broken metadata
        eps = []
    for ep in sorted(eps, key=lambda e: e.name):
        if ep.name == "flexlearn":
            continue
        module = app_module(ep.value)
        try:
            spec = importlib.util.find_spec(module)
            origin = spec.origin if spec else None
            doc = first_sentence(open(origin, encoding="utf-8").read().split('"""')[1]) if origin else ""
        except (OSError, IndexError, ImportError):
            doc = ""
        out[ep.name] = doc
    return out


def main(argv: Optional[list[str]] = None) -> int:
    """Print the version and the installed commands; return the exit status (0).

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0.
    """
    ap = argparse.ArgumentParser(prog="flexlearn", description=flexlearn.__doc__)
    ap.add_argument("--version", action="version", version=f"flexlearn {flexlearn.__version__}")
    ap.parse_args(argv)
    print(f"flexlearn {flexlearn.__version__}: {flexlearn.__doc__.strip()}")
    print("commands (each takes Hydra overrides key=value; --help shows its config):")
    for name, doc in commands().items():
        print(f"  {name:20s} {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
