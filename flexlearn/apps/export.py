"""`flexlearn-export ckpt_path=...`: TorchScript (.pt) and torch.export (.pt2) files of a checkpoint,
and with ``bundle.enabled=true`` the robot bundle (estimator + controller + model + calibration).
`flexlearn-export target=arm_controller [arm_controller.<key>=...]`: the scripted flexible-arm controller
(IMU estimator + eq. (45) law) with its configuration in the file's metadata."""
from __future__ import annotations

import json
from pathlib import Path

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.config import check
from flexlearn.jobs.export import export_checkpoint, export_robot_bundle


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="export")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-export"):
        if cfg.get("target", "checkpoint") == "arm_controller":
            from flexlearn.runtime.arm_controller import export_arm_controller_from_config

            path = export_arm_controller_from_config(cfg.arm_controller, Path(cfg.out_dir) / cfg.arm_controller_file)
            print(json.dumps({"arm_controller": str(path)}, indent=2))
            return
        check(cfg.get("target", "checkpoint") == "checkpoint", "export.target", cfg.get("target"),
              "one of 'checkpoint', 'arm_controller'")
        paths = export_checkpoint(cfg.ckpt_path, cfg.out_dir, cfg=cfg)
        if cfg.bundle.enabled:
            paths["bundle"] = export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)
    print(json.dumps(paths, indent=2))


if __name__ == "__main__":
    main()
