"""`flexlearn-export ckpt_path=...`: TorchScript (.pt) and torch.export (.pt2) files of a checkpoint,
and with ``bundle.enabled=true`` the robot bundle (estimator + controller + model + calibration)."""
from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.tasks.training import export_checkpoint, export_robot_bundle


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="export")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-export"):
        paths = export_checkpoint(cfg.ckpt_path, cfg.out_dir, cfg=cfg)
        if cfg.bundle.enabled:
            paths["bundle"] = export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)
    print(json.dumps(paths, indent=2))


if __name__ == "__main__":
    main()
