"""`flexlearn-export ckpt_path=...`: TorchScript (.pt) and torch.export (.pt2) files of a checkpoint,
and with ``bundle.enabled=true`` the robot bundle (estimator + controller + model + calibration).
`flexlearn-export target=arm_controller [arm_controller.<key>=...]`: the scripted flexible-arm controller
(IMU estimator + eq. (45) law) with its configuration in the file's metadata.

Each file gets its manifest ``<file>.manifest.json`` (loaders refuse a model file without a matching one);
options are checked before anything is written and the files land together or not at all. Errors end in one
line and exit status 2."""

from __future__ import annotations

import json

from omegaconf import DictConfig

from flexlearn.apps.console import show_outcome
from flexlearn.apps.runner import hydra_app, readable_errors


@hydra_app("flexlearn-export", "export")
def main(cfg: DictConfig) -> None:
    """Export what ``cfg.target`` names; print what was written, the next step and the directory (``json=true``:
    {what: path} as JSON instead).

    Args:
        cfg: the composed config (flexlearn/conf/export.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-export"):
        from flexlearn.jobs.export import export_from_config  # heavy import off the start-up path (torch)

        paths = export_from_config(cfg)
    if cfg.get("json", False):
        print(json.dumps(paths, indent=2))
        return
    show_outcome(export_summary(paths), cfg.get("kit") or cfg.out_dir)


def export_summary(paths: dict[str, str]) -> list[str]:
    """What was written (one line per file) and the next step for what it is.

    Args:
        paths: {what: path} of `flexlearn.jobs.export.export_from_config`.

    Returns:
        The summary lines.
    """
    lines = [f"flexlearn-export: {len(paths)} outputs written, each model file with its manifest (.manifest.json)"]
    lines += [f"  {what}: {path}" for what, path in paths.items()]
    if "kit" in paths:
        step = f"copy {paths['kit']} to the Pi and follow its README.md (docs/raspberry_pi.md)"
    elif "bundle" in paths:
        step = f"python scripts/pi_runner.py {paths['bundle']}, or a Pi folder: kit=<dir> (docs/raspberry_pi.md)"
    elif "arm_controller" in paths:
        step = "torch.jit.load it on the controller computer, plain torch only (docs/arm_controller.md)"
    else:
        step = "bundle.enabled=true bundle.calibration=<file> for the robot bundle, or kit=<dir> for the Pi"
    return lines + ["next: " + step]


if __name__ == "__main__":
    main()
