"""scripts/reproduce_seed002_table1.py end to end on tiny settings (slow: fits its own direction model)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_seed002_table1.py"


@pytest.mark.slow
def test_reproduce_table1_tiny(tmp_path):
    spec = importlib.util.spec_from_file_location("repro", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (
        mod.main(
            [
                "--duration",
                "8",
                "--trials",
                "1",
                "--cycles",
                "1",
                "--hold",
                "12",
                "--long",
                "10",
                "--long-trials",
                "1",
                "--align-init",
                "12",
                "--first-trial",
                "1",
                "--out-dir",
                str(tmp_path),
                "--mcap",
            ]
        )
        == 0
    )
    out = json.loads((tmp_path / "table1.json").read_text())
    methods = {"fusion", "fusion_heading_walk", "fusion_rotation", "mag_only", "quat_only", "accel_quat", "accel_only"}
    for sc in ("2d_curl", "2d_obstacle", "3d_curl", "3d_hand", "average"):
        assert set(out[sc]) - {"fusion_wins_over_quat_only"} == methods
        assert set(out["long"][sc]) - {"fusion_wins_over_quat_only"} == methods
        assert out[sc]["fusion"]["backbone_rmse_mm"] < out[sc]["mag_only"]["backbone_rmse_mm"]
        assert out[sc]["fusion"]["backbone_rmse_mm"] < out[sc]["accel_only"]["backbone_rmse_mm"]
    assert out["settings"]["first_trial"] == 1 and out["long"]["first_trial"] == 1
    assert "cyclic" in out["drift"] and "static_hold" in out["drift"]
    assert (tmp_path / "backbones.png").stat().st_size > 10_000
    for sc in ("2d_curl", "2d_obstacle", "3d_curl", "3d_hand"):  # read back in tests/replay/test_mcap.py
        assert (tmp_path / f"shapes_{sc}.mcap").read_bytes()[:8] == b"\x89MCAP0\r\n"
