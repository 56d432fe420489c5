"""`flexlearn-eval ckpt_path=...`: test metrics and figures of a trained checkpoint."""
from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.jobs.evaluate import evaluate_checkpoint


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="eval")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-eval"):
        metrics = evaluate_checkpoint(cfg.ckpt_path, cfg)
    print(json.dumps({k: v for k, v in metrics.items() if k.startswith("test/")}, indent=2))
    print(metrics["output_dir"])


if __name__ == "__main__":
    main()
