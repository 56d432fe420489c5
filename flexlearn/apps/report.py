"""`flexlearn-report sessions=[...] output=<dir>`: dataset quality report (Markdown + PNG) of recorded sessions."""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from flexlearn.apps._runner import hydra_app, readable_errors


@hydra_app("flexlearn-report", "report")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-report"):
        from flexlearn.data.report import write_report

        sessions = list(cfg.sessions) if not isinstance(cfg.sessions, str) else [cfg.sessions]
        options = OmegaConf.to_container(cfg.options, resolve=True)
        result = write_report(sessions, cfg.output, names=list(cfg.names) if cfg.names else None, **options)
    print(result["markdown"])


if __name__ == "__main__":
    main()
