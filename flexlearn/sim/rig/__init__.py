"""Sweep-rig simulator: raw sensor streams of one joint swept over a spherical cap (seed 002, III-A/B1/B2).

Physical model (SI units; parent frame = world frame, z up, origin at the parent coil's board mid-plane):

* Joint (seed 002, III-B1; `geometry`): fixed-radius spherical pivot without twist at (0, 0, −(``platform_offset``
  + ``pivot_to_next``)): the parent board sits ``platform_offset`` + ``pivot_to_next`` = 19 mm above the pivot,
  the child board on the sphere of radius ``pivot_radius`` = 10 mm around it. A child direction u ∈ S²
  (u = (0, 0, −1) straight) gives R_rel = exp(rotation_between(e, u)), e = (0, 0, −1), and the child sensor frame
  R_child = R_rel · M with a fixed mount misalignment M. The sensor sits at pivot + pivot_radius·u + R_rel·offset.
  (Placing the sensor 19 mm beyond the pivot and the coil 10 mm above it instead makes the joint nearly
  unobservable from the field direction: for a dipole source the field at the sensor tilts by
  ≈ 1.5·b/(a + b) ≈ 0.98 of the bend, which the sensor frame's own rotation cancels. See `sensor_position`.)
  Other rigs: a universal joint, a pivot off the coil's axis, separate IMU and magnetometer chips with their
  own positions and rotations on the board (`flexlearn.sim.rig_config.JointGeometry`).
* Coil (seed 002, III-A; `coil`): `PlanarCoil` (or a multilayer stack) in the parent frame, current I scaled so
  that |B| = ``field_at_neighbour`` at the straight-pose sensor (or a given ``coil_current``); first-order
  current settling i(t) with time constant ``coil_tau`` after each switch. Exact for switch intervals ≫ τ (the
  current at a switch is taken as settled; error e^{−Δt/τ}).
* Magnetometer and accelerometer (`sensors`): conversions on free-running clocks, quantised and clipped; the
  sensor parts (`flexlearn.sensing.parts`) may set their datasheet values (`RigConfig.with_parts`).
* Module tolerances (`flexlearn.sim.modules`, config block ``module``, docs/modules.md): the sweep's module
  (``module_seed``, −1: ``seed``) has its own pivot radius, joint length, sensor offset, coil offset/tilt and
  magnetometer axes against the accelerometer's; the coil current is set for the nominal design. ``meta['module']``
  records the draw and ``meta['tumble']`` the module's hand-tumble readings (ellipsoid fit, seed 002 III-B3).
* Faulty "non-stationary" poses keep swinging after the move (`motion`), while the rig reports them stationary.
* Acquisition (seed 002, III-B1/B2; `schedule`): fixed pose slots, coil pulse pairs until the firmware has
  ``min_fresh`` fresh settled coil-on polls.

Seed notes: the seed's M_e = 2eeᵀ − I (III-B3) maps the label (parent axis in the child frame) to −u under
the no-twist model; the reflection that gives u is I − 2eeᵀ (tests/sim/test_sim_rig.py::test_truth_geometry).
The seed's "near 1 Ω" coil is ≈1.6 Ω with its stated trace (see `flexlearn.sensing.coil`).
"""

from __future__ import annotations

from flexlearn.sim.rig.coil import StackedCoil, build_coil
from flexlearn.sim.rig.geometry import STRAIGHT, UP, child_frame, coil_current, joint_rotation, sensor_position
from flexlearn.sim.rig.meta import META_UNITS
from flexlearn.sim.rig.sweep import simulate_sweep
from flexlearn.sim.rig_config import RigConfig

__all__ = [
    "RigConfig",
    "simulate_sweep",
    "child_frame",
    "sensor_position",
    "coil_current",
    "joint_rotation",
    "build_coil",
    "StackedCoil",
    "STRAIGHT",
    "UP",
    "META_UNITS",
]
