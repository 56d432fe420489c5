"""`flexlearn-pipeline`: the main job — simulate (cached), process, train, evaluate, export.

A run that diverges fails with one line and exit status 2 and exports nothing (`flexlearn.jobs.train`).
"""
from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.jobs.train import train

SUMMARY_KEYS = ("test/ang_err_median_deg", "test/ang_err_p95_deg", "test/ang_err_rms_deg", "test/ang_err_mean_deg",
                "test/invalid_fraction")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="pipeline")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-pipeline"):
        metrics = train(cfg)
    summary = {k: round(metrics[k], 3) for k in SUMMARY_KEYS if k in metrics}
    summary.update(exports=metrics.get("exports"), figures=sorted((metrics.get("figures") or {}).values()))
    print(json.dumps(summary, indent=2))
    print(metrics["output_dir"])


if __name__ == "__main__":
    main()
