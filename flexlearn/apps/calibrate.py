"""`flexlearn-calibrate ckpt_path=<ckpt> inputs=[<module 1>,...]`: a calibration file for new modules.

Each input (a raw sweep directory with the module's tumble, a ``flexlearn-ingest`` output directory of a recording
that carries the tumble — docs/ingest.md, "Record the hand tumble" —, or a processed dataset) gives W (tumble
ellipsoid; identity with ``require_tumble=false``) and A (at most ``n_poses`` stationary poses); the file
(``output``) is what ``flexlearn-export bundle.calibration=...`` and ``scripts/pi_runner.py --calibration`` take
(docs/modules.md). Errors end in one line and exit status 2.
"""

from __future__ import annotations

import json

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors, require_values
from flexlearn.atomic import guard_output_file


@hydra_app("flexlearn-calibrate", "calibrate")
def main(cfg: DictConfig) -> None:
    """Write the calibration file ``cfg.output`` for the input modules; print its summary (JSON).

    Args:
        cfg: the composed config (flexlearn/conf/calibrate.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-calibrate"):
        require_values(cfg)
        from flexlearn.jobs.calibrate import calibrate  # heavy import off the start-up path (the data stack)

        inputs = [cfg.inputs] if isinstance(cfg.inputs, str) else list(cfg.inputs)
        guard_output_file(cfg.output, inputs=inputs)
        summary = calibrate(cfg)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
