"""One simulated stationary-pose sweep of the rig (`simulate_sweep`): targets, module draws, streams, truth, meta.

Determinism: every random draw comes from a `numpy.random.SeedSequence(cfg.seed)` child stream (targets,
rig error, sensor parameters, timing, noise, faults), so changing a fault rate does not change the targets.
Torch reductions in the Biot–Savart sum may differ in the last bit between thread counts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Union

import numpy as np
import torch

import flexlearn
from flexlearn.config import from_dict, to_dict
from flexlearn.sensing.streams import RAW_SCHEMA_VERSION, RawSweep
from flexlearn.sim.modules import ModuleDraw, PlacedCoil, draw_module
from flexlearn.sim.numpy_lie import single_torch_thread
from flexlearn.sim.rig.coil import build_coil
from flexlearn.sim.rig.geometry import child_frame, chip_mounts, coil_current, rotate, sensor_position, tangent_basis
from flexlearn.sim.rig.meta import META_UNITS, coil_meta, rig_meta, sensor_meta, tumble_meta
from flexlearn.sim.rig.motion import build_motion
from flexlearn.sim.rig.schedule import build_schedule
from flexlearn.sim.rig.sensors import CoilDrive, Sensors, accel_stream, draw_sensors, mag_stream
from flexlearn.sim.rig_config import RigConfig
from flexlearn.sim.targets import cap_direction, sample_cap_targets

__all__ = ["simulate_sweep", "perturb", "mount_chips"]

RNG_STREAMS = ("targets", "rig", "sensors", "timing", "mag", "accel", "faults", "motion", "module")
"""The child streams of ``SeedSequence(seed)``, in spawn order (the module's own: ``sensors`` and ``module``)."""


def perturb(targets: np.ndarray, cfg: RigConfig, rng: np.random.Generator) -> np.ndarray:
    """Actual directions: targets rotated by an RMS ``positioning_error`` ⟂ tilt, clamped to the limit.

    Args:
        targets: commanded unit directions (P, 3) in the parent frame.
        cfg: the rig configuration (``geometry.positioning_error`` [rad], ``geometry.mechanical_limit`` [rad]).
        rng: generator of the positioning errors.

    Returns:
        The actual unit directions (P, 3).
    """
    a, b = tangent_basis(targets)
    g = rng.normal(0.0, cfg.geometry.positioning_error / math.sqrt(2.0), (targets.shape[0], 2))
    u = rotate(g[:, :1] * a + g[:, 1:] * b, targets)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    col = np.arccos(np.clip(-u[:, 2], -1.0, 1.0))
    over = col > cfg.geometry.mechanical_limit
    u[over] = cap_direction(cfg.geometry.mechanical_limit, np.arctan2(u[over, 1], u[over, 0]))
    return u


def mount_chips(sens: Sensors, draw: ModuleDraw, cfg: RigConfig) -> None:
    """Place the chips of this module on its child board, in place.

    IMU frame M = M_mis · R_imu (misalignment, then the chip's rotation ``geometry.imu_mount``); magnetometer axes
    against the IMU's Q = R_imuᵀ R_mag Q_draw (``geometry.magnetometer_mount``, the module's die-to-die draw).

    Args:
        sens: this module's sensor draws, updated in place (mount, magnetometer axes, board offset).
        draw: the module's tolerance draw.
        cfg: the rig configuration (``geometry`` chip mounts).
    """
    imu, mag = chip_mounts(cfg)
    sens.board_offset = np.asarray(draw.sensor_offset, dtype=np.float64)
    sens.mag_axes = draw.mag_axes
    if mag is not None:
        sens.mag_axes = mag @ sens.mag_axes
    if imu is not None:
        sens.mount = sens.mount @ imu
        sens.mag_axes = imu.T @ sens.mag_axes


def simulate_sweep(cfg: Union[RigConfig, Mapping[str, Any], None] = None) -> RawSweep:
    """Simulate a full stationary-pose sweep; deterministic given ``cfg.seed``.

    Args:
        cfg: a `RigConfig`, a plain mapping for ``from_dict(RigConfig, ·)``, or None for the defaults.

    Returns:
        `RawSweep` with mag/accel/coil streams, the pose log (target = commanded direction), ``truth`` (label
        = R_childᵀ ẑ, u = actual direction, db = S·Qᵀ·R_childᵀ·I·B_coil in the magnetometer frame [T]) and ``meta``.

    Raises:
        ConfigError: a key or value of the config is wrong (the message names its key path).
    """
    if cfg is None:
        cfg = RigConfig()
    elif not isinstance(cfg, RigConfig):
        cfg = from_dict(RigConfig, cfg)
    cfg.validate()
    with single_torch_thread():
        return _simulate(cfg)


def _rngs(cfg: RigConfig) -> tuple[dict[str, np.random.Generator], int]:
    seqs = np.random.SeedSequence(cfg.seed).spawn(len(RNG_STREAMS))
    module_seed = cfg.seed if cfg.module_seed < 0 else cfg.module_seed
    if module_seed != cfg.seed:  # the module's own draws (sensors, tolerances) come from its seed
        own = np.random.SeedSequence(module_seed).spawn(len(RNG_STREAMS))
        seqs[2], seqs[8] = own[2], own[8]
    return dict(zip(RNG_STREAMS, (np.random.default_rng(s) for s in seqs))), module_seed


def _simulate(cfg: RigConfig) -> RawSweep:
    """Body of `simulate_sweep` for a validated config."""
    nominal = cfg
    cfg = cfg.with_parts()  # the chips' datasheet values
    rngs, module_seed = _rngs(cfg)
    p, fr = cfg.n_poses, rngs["faults"]
    swing = fr.uniform(size=p) < cfg.faults.swing_rate
    short = fr.uniform(size=p) < cfg.faults.short_pulse_rate

    targets = sample_cap_targets(p, cfg.geometry.max_colatitude, cfg.geometry.n_cells, rngs["targets"])
    u_act = perturb(targets, cfg, rngs["rig"])
    sens = draw_sensors(cfg, rngs["sensors"])
    draw = draw_module(cfg.module, rngs["module"])
    mount_chips(sens, draw, cfg)
    design = cfg
    cfg = dataclasses.replace(cfg, geometry=draw.geometry(cfg.geometry))  # this module's joint
    coil = PlacedCoil(build_coil(cfg.coil, cfg.coil_layers), draw)
    current = coil_current(coil.coil, design)  # drive set for the design
    r_rel, r_child = child_frame(u_act, sens.mount, cfg.geometry.joint)
    pos = sensor_position(u_act, r_rel, cfg)
    pose = {"r": r_child, "pos": pos, "b": coil.field(torch.from_numpy(pos)).numpy()}

    sched, clocks = build_schedule(cfg, short, rngs["timing"])
    motion = build_motion(cfg, sched.slot, sched.move_dur, u_act, swing, rngs["motion"])
    fired = np.isfinite(sched.t_on)
    coil_t = np.stack([sched.t_on, sched.t_off], axis=-1)[fired]  # (N_c/2, 2) in time order
    coil_on = np.broadcast_to(np.array([True, False]), coil_t.shape).reshape(-1)
    coil_t = coil_t.reshape(-1)
    drive = CoilDrive(coil, current, coil_t, coil_on)
    mag, counts = mag_stream(cfg, clocks, motion, sens, drive, pose, rngs["mag"], fr)
    accel_t, accel = accel_stream(cfg, sched, motion, sens, pose, rngs["accel"])

    truth = {"pose_id": np.arange(p, dtype=np.int64)}
    db = current * np.einsum("ij,nkj,nk->ni", sens.mag_gain, r_child, pose["b"])
    for name, arr in (("label", r_child[:, 2, :]), ("u", u_act), ("db", db)):  # label = R_childᵀ ẑ
        for i, c in enumerate("xyz"):
            truth[f"{name}_{c}"] = np.ascontiguousarray(arr[:, i])
    meta = {
        "units": META_UNITS,
        "frames": "vectors in the child sensor frame; target/u in the parent frame (z up, straight = -z)",
        "rig": rig_meta(nominal.geometry, sched),
        "coil": coil_meta(cfg, drive),
        "module": {"seed": module_seed, "tolerances": to_dict(cfg.module), "draw": draw.as_dict()},
        "tumble": tumble_meta(cfg, sens, rngs["module"]),
        "sensors": sensor_meta(cfg, sens, counts),
        "acquisition": to_dict(cfg.acquisition),
        "faults": {
            "swing_poses": np.flatnonzero(swing).tolist(),
            "short_pulse_poses": np.flatnonzero(short).tolist(),
            "nan_polls": counts["nan_polls"],
            "saturated_conversions": counts["saturated_conversions"],
        },
        "firmware_fresh": {"min": int(sched.fresh.min()), "mean": float(sched.fresh.mean())},
        "seed": cfg.seed,
        "config": to_dict(nominal),
        **({"sensor": parts.to_config()} if (parts := cfg.sensor_parts()) is not None else {}),  # processing checks it
        "provenance": {
            "simulator": "flexlearn.sim.rig",
            "version": flexlearn.__version__,
            "raw_schema_version": RAW_SCHEMA_VERSION,
        },
    }
    streams = {
        "mag": {"t": clocks.poll_t, "mag": mag},
        "accel": {"t": accel_t, "accel": accel},  # by `STREAMS`
        "coil": {"t": coil_t, "on": coil_on},
        "poses": {
            "pose_id": np.arange(p, dtype=np.int64),
            "t_start": sched.t_start,
            "t_end": sched.t_end,
            "target": targets,
        },
        "truth": truth,
    }
    return RawSweep(streams=streams, meta=meta)
