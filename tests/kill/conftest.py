"""The kill harness (scripts/kill_harness.py) as a fixture: writers and runs killed at sampled instants."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kill_harness.py"


@pytest.fixture(scope="session")
def kill_harness() -> ModuleType:
    """The harness module: ``writer_trial(kind, target, signal, delay)``, ``train_trial(root, signal, delay)``,
    ``read_version``, ``strict_json``."""
    spec = importlib.util.spec_from_file_location("kill_harness", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kill_commands() -> ModuleType:
    """The command trials (scripts/kill_commands.py): ``Inputs``, ``command_trial``, ``temporaries``."""
    path = SCRIPT.with_name("kill_commands.py")
    spec = importlib.util.spec_from_file_location("kill_commands", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kill_commands"] = module  # its dataclasses look their module up; kill_harness imports it too
    spec.loader.exec_module(module)
    return module
