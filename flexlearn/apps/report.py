"""`flexlearn-report sessions=[...] output=<dir>`: dataset quality report (Markdown + PNG) of recorded sessions."""

from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors
from flexlearn.config import to_plain_dict


@hydra_app("flexlearn-report", "report")
def main(cfg: DictConfig) -> None:
    """Write the quality report of ``cfg.sessions``; print the Markdown file's path.

    Args:
        cfg: the composed config (flexlearn/conf/report.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-report"):
        from flexlearn.data.report import write_report  # heavy import off the start-up path (matplotlib)

        sessions = list(cfg.sessions) if not isinstance(cfg.sessions, str) else [cfg.sessions]
        options = to_plain_dict(cfg.options, "options")
        result = write_report(sessions, cfg.output, names=list(cfg.names) if cfg.names else None, **options)
    print(result["markdown"])


if __name__ == "__main__":
    main()
