"""`flexlearn-plan`: a sweep's target list (CSV/YAML), or with ``compare=[...]`` its coverage by recorded sessions."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors
from flexlearn.atomic import guard_output_dir, guard_output_file
from flexlearn.config import from_dict


@hydra_app("flexlearn-plan", "plan")
def main(cfg: DictConfig) -> None:
    """Write the sweep's target list, or its coverage by the recorded sessions ``cfg.compare``.

    Args:
        cfg: the composed config (flexlearn/conf/plan.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-plan"):
        # heavy import off the start-up path (the data stack)
        from flexlearn.ingest.plan import PlanConfig, cell_fill_of, plan_sweep, write_coverage, write_plan

        plan_cfg = from_dict(PlanConfig, cfg.plan, "plan")
        if cfg.compare:
            guard_output_dir(cfg.coverage_dir, inputs=[*cfg.compare, *([cfg.plan_file] if cfg.plan_file else [])])
            cov = cell_fill_of(
                [Path(d) for d in cfg.compare],
                Path(cfg.plan_file) if cfg.plan_file else None,
                plan_cfg,
                float(cfg.min_fill),
            )
            paths = write_coverage(cov, cfg.coverage_dir, plan_cfg.max_colatitude_deg)
            s = cov.summary()
            print(
                f"{s['recorded']} kept of {s['planned']} planned; {len(s['under_filled'])} of {s['cells']} cells "
                f"under-filled"
            )
            print(json.dumps(paths, indent=2))
        else:
            guard_output_file(cfg.output)
            print(write_plan(plan_sweep(plan_cfg), cfg.output))


if __name__ == "__main__":
    main()
