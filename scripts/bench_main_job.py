"""Time the main job (`flexlearn-pipeline` on its embedded default) cold and warm, and report its metrics.

Cold: an empty project root (the sweep is simulated and processed). Warm: the same root again (the
cached sweep and dataset are reused). Prints JSON with wall-clock seconds and the test metrics.

    python scripts/bench_main_job.py [--root DIR] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_pipeline(root: Path, overrides: list[str]) -> dict:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.pipeline", *overrides], env=env, cwd=root, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pipeline failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out_dir = Path(proc.stdout.strip().splitlines()[-1])
    metrics = json.loads((out_dir / "metrics.json").read_text())
    keep = {
        k: v
        for k, v in metrics.items()
        if k.startswith(("test/", "val/"))
        or k == "epochs"
        or (k.startswith("test_module") and k.count("/") <= 2 and "/module" not in k)
    }  # held-out modules
    return {"wall_s": wall, "output_dir": str(out_dir), "metrics": keep}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="project root for logs/cache (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed to the pipeline")
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="flexlearn-bench-"))
    cold = run_pipeline(root, args.overrides)
    warm = run_pipeline(root, args.overrides)
    print(json.dumps({"root": str(root), "cpu_count": os.cpu_count(), "cold": cold, "warm": warm}, indent=2))


if __name__ == "__main__":
    main()
