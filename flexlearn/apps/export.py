"""`flexlearn-export ckpt_path=...`: TorchScript (.pt) and torch.export (.pt2) files of a checkpoint."""
from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.tasks.training import export_checkpoint


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="export")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-export"):
        paths = export_checkpoint(cfg.ckpt_path, cfg.out_dir, cfg=cfg)
    print(json.dumps(paths, indent=2))


if __name__ == "__main__":
    main()
