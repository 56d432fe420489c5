"""`flexlearn-export target=arm_controller`: the CLI writes the scripted flexible-arm controller with its
configuration in the file's metadata; plain torch (flexlearn not importable) loads and steps it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import torch

PLAIN_TORCH_STEPPER = textwrap.dedent("""
    import sys, json, math
    sys.modules["flexlearn"] = None          # nothing of flexlearn may be imported
    try:
        import flexlearn  # noqa: F401
        raise SystemExit("flexlearn was importable")
    except ImportError:
        pass
    import torch
    extra = {"metadata.json": ""}
    m = torch.jit.load(sys.argv[1], _extra_files=extra)
    meta = json.loads(extra["metadata.json"])
    g = 9.80665
    angs = [0.2, 0.2, -0.4, -0.4, -0.4]
    fr = torch.zeros(len(angs), 6, dtype=torch.float64)
    for k, a in enumerate(angs):
        fr[k, 1], fr[k, 2] = g * math.sin(a), g * math.cos(a)
    taus, faults = [], []
    for k in range(20):
        tau, state, fault = m(fr, k * 1e-3)
        taus.append(tau.tolist())
        faults.append(int(fault))
    bad = fr.clone()
    bad[2, 4] = float("nan")
    tau_bad, _, fault_bad = m(bad, 0.02)
    out = {"meta": meta, "taus": taus, "faults": faults, "theta": state[0:2].tolist(),
           "tau_bad": tau_bad.tolist(), "fault_bad": int(fault_bad), "last": taus[-1]}
    print(json.dumps(out))
""")


def test_cli_exports_arm_controller_loadable_by_plain_torch(tmp_path):
    out = tmp_path / "export"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "flexlearn.apps.export",
            "target=arm_controller",
            f"out_dir={out}",
            "+arm_controller.variant=rigid",
            "+arm_controller.hub_inertia=[800.0,150.0]",
            f"hydra.run.dir={tmp_path / 'hydra'}",
            "json=true",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    path = out / "arm_controller.pt"
    assert path.is_file() and json.loads(r.stdout)["arm_controller"] == str(path)
    script = tmp_path / "step.py"
    script.write_text(PLAIN_TORCH_STEPPER)
    s = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr[-2000:]
    res = json.loads(s.stdout)
    cfg = res["meta"]["config"]
    assert res["meta"]["kind"] == "flexible_arm_controller"
    assert cfg["variant"] == "rigid" and cfg["hub_inertia"] == [800.0, 150.0] and cfg["kp"] == [6000.0, 12000.0]
    assert res["faults"] == [0] * 20
    assert all(math.isfinite(v) for row in res["taus"] for v in row)
    # the same controller built in this process gives the same torques, bit for bit
    from flexlearn.runtime.arm.config import ArmControllerConfig
    from flexlearn.runtime.arm.controller import ArmController

    c = ArmController.build(ArmControllerConfig(variant="rigid", hub_inertia=(800.0, 150.0)))
    g = 9.80665
    fr = torch.zeros(5, 6, dtype=torch.float64)
    for k, a in enumerate([0.2, 0.2, -0.4, -0.4, -0.4]):
        fr[k, 1], fr[k, 2] = g * math.sin(a), g * math.cos(a)
    ref = [c(fr, k * 1e-3)[0].tolist() for k in range(20)]
    assert res["taus"] == ref
    assert res["last"][0] > 1000.0  # holds link weights against gravity
    # a NaN sample: flagged, last valid torques held
    assert res["fault_bad"] == 2 and res["tau_bad"] == res["last"]


def test_cli_rejects_unknown_controller_key(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "flexlearn.apps.export",
            "target=arm_controller",
            f"out_dir={tmp_path / 'x'}",
            "+arm_controller.not_a_key=1",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "not_a_key" in r.stderr
    assert not (tmp_path / "x" / "arm_controller.pt").exists()
