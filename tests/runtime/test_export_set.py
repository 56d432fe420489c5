"""An export set commits atomically under SIGKILL and SIGTERM: at any instant of the commit, what a loader finds is
the old set whole or the new one whole (a commit a kill left half-done is completed by the loader), never a mix
or a refused folder; the next export removes every hidden temporary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn.runtime.export import Artifact, write_artifacts
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, manifest_path, verify_manifest

NAMES = ("direction_model.pt", "direction_model.pt2", "robot_bundle.pt")

# Writes the set "new" over "old" in sys.argv[1]; the k-th rename (sys.argv[2]) ends the process as a signal would:
# "kill" exits at once (SIGKILL: no cleanup, no rollback), "term" sends SIGTERM to itself and carries on.
CHILD = """
import os, signal, sys
from pathlib import Path
from flexlearn.runtime.export import Artifact, write_artifacts
folder, k, how = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
real, calls = os.replace, [0]
def replace(src, dst):
    calls[0] += 1
    if calls[0] == k:
        if how == "kill":
            os._exit(137)
        os.kill(os.getpid(), signal.SIGTERM)
    return real(src, dst)
os.replace = replace
names = %r
write_artifacts([Artifact(folder / n, b"new " + n.encode() * 50, "x") for n in names])
""" % (NAMES,)


def _write(folder: Path, tag: bytes) -> None:
    write_artifacts([Artifact(folder / n, tag + b" " + n.encode() * 50, "x") for n in NAMES])


def _accepted(folder: Path) -> dict[str, bytes]:
    """Every file of the set that a loader accepts (manifest and set verified), by name → its first bytes."""
    out = {}
    for n in NAMES:
        try:
            verify_manifest(folder / n)
        except UntrustedArtifactError:
            continue
        out[n] = (folder / n).read_bytes()[:3]
    return out


def test_every_manifest_names_the_whole_set(tmp_path):
    _write(tmp_path, b"old")
    for n in NAMES:
        record = json.loads(manifest_path(tmp_path / n).read_text())
        assert sorted(record["set"]) == sorted(NAMES)
        assert verify_manifest(tmp_path / n)["sha256"] == record["set"][n]


def test_a_file_beside_a_sibling_of_another_export_is_refused(tmp_path):
    _write(tmp_path, b"old")
    other = tmp_path / "other"
    other.mkdir()
    _write(other, b"new")
    for name in (NAMES[1], NAMES[1] + ".manifest.json"):  # the new .pt2, with its own manifest, copied in
        (tmp_path / name).write_bytes((other / name).read_bytes())
    with pytest.raises(UntrustedArtifactError, match="different exports") as info:
        verify_manifest(tmp_path / NAMES[0])
    assert "\n" not in str(info.value) and NAMES[1] in str(info.value)
    with pytest.raises(UntrustedArtifactError, match="different exports"):
        verify_manifest(tmp_path / NAMES[1])
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in (NAMES[2], NAMES[2] + ".manifest.json"):  # a part of the set copied alone (e.g. to the Pi)
        (alone / name).write_bytes((tmp_path / name).read_bytes())
    verify_manifest(alone / NAMES[2])


RENAMES = 1 + 2 * len(NAMES)  # the journal (the commit), then three files, then three manifests


@pytest.mark.parametrize(
    "k,how", [(k, "kill") for k in range(1, RENAMES + 1)] + [(1, "term"), (2, "term"), (len(NAMES) + 2, "term")]
)
def test_a_signal_at_any_rename_leaves_one_whole_set(tmp_path, k, how):
    _write(tmp_path, b"old")
    res = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(k), how], capture_output=True, timeout=120)
    accepted = _accepted(tmp_path)  # the loader completes a commit the kill left half-done
    if how == "term":  # SIGTERM is held back until the commit is done, then ends the process
        assert res.returncode == -15, res
    else:
        assert res.returncode == 137, res
    whole = {b"old"} if how == "kill" and k == 1 else {b"new"}  # killed before the journal landed: the old set
    assert set(accepted.values()) == whole and len(accepted) == len(NAMES), f"after rename {k}: {accepted}"
    _write(tmp_path, b"fix")  # the next export repairs whatever was left
    assert set(_accepted(tmp_path).values()) == {b"fix"} and len(_accepted(tmp_path)) == len(NAMES)
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert hidden == [], hidden
