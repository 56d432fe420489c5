"""A sample of the command kills: `flexlearn-process`, `flexlearn-export` and `flexlearn-calibrate` killed while they
replace an earlier output, at the commit or at a random instant of the run; what is left loads with flexlearn's
loaders as the old or the new version and the next run starts clean. Slow (≈ 50 s for the module; CI runs it in its
second step); the default suite keeps the interrupted commands of tests/kill/test_commands_interrupt.py.
`python scripts/kill_harness.py --commands N` runs hundreds."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def command_inputs(kill_commands, trained_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("kill-commands")
    ckpt = root / "model" / "last.ckpt"
    ckpt.parent.mkdir()
    shutil.copy(trained_run["metrics"]["last_ckpt"], ckpt)
    return kill_commands.Inputs.from_checkpoint(root, ckpt)


pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "kind,sig,when",
    [("export", "SIGKILL", "commit"), ("process", "SIGTERM", "run"), ("calibrate", "SIGINT", "commit")],
)
def test_a_killed_command_leaves_a_whole_version(kill_commands, command_inputs, kind, sig, when):
    target = command_inputs.root / kind / {"process": "d.parquet", "export": "out", "calibrate": "c.json"}[kind]
    target.parent.mkdir(exist_ok=True)
    kill_commands._run(command_inputs.command(kind, 1, target), command_inputs.root)
    rng = random.Random(f"{kind}-{sig}-{when}")
    delay = rng.uniform(0.0, 0.02) if when == "commit" else rng.uniform(1.0, 4.0)
    trial = kill_commands.command_trial(command_inputs, kind, target, sig, when, delay)
    assert trial["violation"] == "", trial
    assert trial["after"] in (1, 2), trial
    assert kill_commands.temporaries(kind, target) == []


def test_the_check_finds_a_truncated_dataset_and_a_mixed_export(kill_commands, command_inputs):
    """The loaders' verdicts the trials rely on can fail: a truncated dataset and an export set with one file
    of the other version are not taken as a version."""
    root = command_inputs.root / "attacks"
    root.mkdir()
    data = root / "d.parquet"
    kill_commands._run(command_inputs.command("process", 1, data), command_inputs.root)
    assert command_inputs.version_of("process", data) == 1
    data.write_bytes(data.read_bytes()[:-200])
    with pytest.raises(ValueError, match="dataset does not load"):
        command_inputs.version_of("process", data)
    one, two = root / "one", root / "two"
    for version, folder in ((1, one), (2, two)):
        kill_commands._run(command_inputs.command("export", version, folder), command_inputs.root)
        assert command_inputs.version_of("export", folder) == version
    for name in ("direction_model.pt", "direction_model.pt.manifest.json"):  # version 2's file, manifest and all
        shutil.copy(two / name, one / name)
    with pytest.raises(ValueError, match="mixed|refused"):
        command_inputs.version_of("export", one)
    assert Path(one / "direction_model.pt2").is_file()
