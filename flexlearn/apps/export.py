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

from flexlearn.apps.runner import hydra_app, readable_errors


@hydra_app("flexlearn-export", "export")
def main(cfg: DictConfig) -> None:
    """Export what ``cfg.target`` names; print {what: path} (JSON).

    Args:
        cfg: the composed config (flexlearn/conf/export.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-export"):
        from flexlearn.jobs.export import export_from_config  # heavy import off the start-up path (torch)

        paths = export_from_config(cfg)
    print(json.dumps(paths, indent=2))


if __name__ == "__main__":
    main()
