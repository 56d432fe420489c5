"""Fixtures of the Pi kit tests: a kit exported from a small direction-model checkpoint."""

from __future__ import annotations

import pytest

from tests.kit.kit_factory import bundle_config, write_checkpoint


@pytest.fixture(scope="session")
def kit(tmp_path_factory):
    """A kit exported in-process (`flexlearn.jobs.export.export_kit`), as `flexlearn-export ... kit=` writes it."""
    from flexlearn.jobs.export import export_kit

    tmp = tmp_path_factory.mktemp("kit")
    ckpt = write_checkpoint(tmp / "m.ckpt", 0)
    export_kit(ckpt, tmp / "kit", bundle_config())
    return tmp / "kit"
