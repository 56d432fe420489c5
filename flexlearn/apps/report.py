"""`flexlearn-report sessions=[...] output=<dir>`: dataset quality report (Markdown + PNG) of recorded sessions."""
from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.data.report import write_report


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="report")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-report"):
        sessions = list(cfg.sessions) if not isinstance(cfg.sessions, str) else [cfg.sessions]
        options = OmegaConf.to_container(cfg.options, resolve=True)
        result = write_report(sessions, cfg.output, names=list(cfg.names) if cfg.names else None, **options)
    print(result["markdown"])


if __name__ == "__main__":
    main()
