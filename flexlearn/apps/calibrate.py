"""`flexlearn-calibrate ckpt_path=<ckpt> inputs=[<module 1>,...]`: a calibration file for new modules.

Each input (a raw sweep directory with the module's tumble, a ``flexlearn-ingest`` output directory of a recording
that carries the tumble — docs/ingest.md, "Record the hand tumble" —, or a processed dataset) gives W (tumble
ellipsoid; identity with ``require_tumble=false``) and A (at most ``n_poses`` stationary poses); the file
(``output``) is what ``flexlearn-export bundle.calibration=...`` and ``scripts/pi_runner.py --calibration`` take
(docs/modules.md). Errors end in one line and exit status 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.console import show_outcome
from flexlearn.apps.runner import hydra_app, readable_errors, require_values
from flexlearn.atomic import guard_output_file


@hydra_app("flexlearn-calibrate", "calibrate")
def main(cfg: DictConfig) -> None:
    """Write the calibration file ``cfg.output`` for the input modules; print a summary, the next step and the
    directory (``json=true``: the summary as JSON instead).

    Args:
        cfg: the composed config (flexlearn/conf/calibrate.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-calibrate"):
        require_values(cfg)
        from flexlearn.jobs.calibrate import calibrate  # heavy import off the start-up path (the data stack)

        inputs = [cfg.inputs] if isinstance(cfg.inputs, str) else list(cfg.inputs)
        guard_output_file(cfg.output, inputs=inputs)
        summary = calibrate(cfg)
    if cfg.get("json", False):
        print(json.dumps(summary, indent=2))
        return
    show_outcome(calibration_summary(summary, str(cfg.ckpt_path)), Path(summary["calibration"]).parent)


def calibration_summary(summary: dict, ckpt_path: str) -> list[str]:
    """The calibration file, each module's fit residual and tumble coverage, and the export that uses it.

    Args:
        summary: what `flexlearn.jobs.calibrate.calibrate` returns.
        ckpt_path: the checkpoint the modules were fitted with.

    Returns:
        The summary lines.
    """
    lines = [f"flexlearn-calibrate: {summary['n_modules']} module(s) calibrated -> {summary['calibration']}"]
    for i, (res, cov) in enumerate(zip(summary["median_residual_deg"], summary["tumble_coverage"]), 1):
        tumble = "no tumble (W = I)" if cov is None else f"tumble coverage {cov:.2f}"
        residual = "no poses fitted" if res is None else f"median residual {res:.3g}° after the fit"
        lines.append(f"  module {i}: {residual}, {tumble}")
    lines.append(
        f"next: flexlearn-export ckpt_path={ckpt_path} bundle.enabled=true bundle.calibration={summary['calibration']}"
    )
    return lines


if __name__ == "__main__":
    main()
