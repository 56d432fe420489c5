"""`flexlearn-warmup`: compile and cache every numba kernel of the package ahead of the first run.

    flexlearn-warmup                 # every group: lse (flexlearn-cpr), pose (CSG inverse statics), cosserat, attitude
    flexlearn-warmup --only lse      # one group
    flexlearn-warmup --list          # which groups would compile (cold) and which are cached; compiles nothing

Prints one line per group (modules, cold or cached, seconds taken) and a JSON summary as the last line.
Without numba installed the kernels do not exist and every model runs on its torch path: it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Optional, Sequence

from flexlearn.apps import kernels
from flexlearn.progress import ticker

GROUP_NAMES = tuple(kernels.GROUPS)  # lse, pose, cosserat, attitude: the default of --only


def build_parser() -> argparse.ArgumentParser:
    """The command line of `flexlearn-warmup` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="flexlearn-warmup", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        default=",".join(GROUP_NAMES),
        help=f"comma-separated groups to compile (default: all of {', '.join(GROUP_NAMES)})",
    )
    parser.add_argument("--list", action="store_true", help="show which groups are cold; compile nothing")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Compile (or list) the kernel groups; print one line per group and a JSON summary.

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0 (also without numba), or 2 on an unknown group.
    """
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in kernels.GROUPS]
    if unknown:
        print(
            f"flexlearn-warmup: error: unknown group {', '.join(map(repr, unknown))} (groups: "
            f"{', '.join(kernels.GROUPS)})",
            file=sys.stderr,
        )
        return 2
    try:
        import numba  # noqa: F401  (optional dependency, and heavy: only probed when compiling)
    except ImportError:
        print("flexlearn-warmup: numba is not installed: nothing to compile (every model runs on its torch path)")
        return 0
    summary: dict[str, dict[str, Any]] = {}
    for name in names:
        group = kernels.GROUPS[name]
        modules = group.modules()
        cold = group.cold()
        state = f"cold ({len(cold)} of {len(modules)} modules)" if cold else "cached"
        if args.list:
            print(f"{name:<9s}{state:<24s}used by {group.used_by}", flush=True)
            summary[name] = {"cold_modules": cold}
            continue
        print(
            f"{name:<9s}{state}: {'compiling' if cold else 'loading'} ({len(modules)} modules, used by "
            f"{group.used_by}; about {group.estimate_s:.0f} s when cold)",
            flush=True,
        )
        t0 = time.perf_counter()
        with ticker(f"{name} kernels", group.estimate_s if cold else None):
            group.warm()
        seconds = time.perf_counter() - t0
        group.remember_warm()
        left = group.cold()
        print(
            f"{name:<9s}{'compiled' if cold else 'loaded'} in {seconds:.1f} s"
            + (f"; still not cached: {', '.join(left)}" if left else ""),
            flush=True,
        )
        summary[name] = {"was_cold": bool(cold), "seconds": round(seconds, 2), "still_cold": left}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
