"""Cosserat rod dynamics with a Lie group variational integrator (LGVI), magnetic actuation and damping
estimation — seed 001 ("Dynamic modeling of soft continuum manipulators using Lie group variational
integration").

Quick start::

    from flexlearn.physics.cosserat import CosseratRod, Gravity, Material, RotatingField, TipMagnet
    pdms = Material(density=1101, youngs_modulus=3.65e5, poisson_ratio=0.5)
    rod = CosseratRod.circular(length=0.06, radius=2e-3, material=pdms, n_elements=10)
    tr = rod.simulate(1.0, 5e-5, loads=[Gravity((0, -9.81, 0)),
                                        TipMagnet((0, 0, 0.0135), RotatingField(0.0145, 0.25), mass=9.6e-5)])
    tr.positions  # (T, N+1, 3); tr.rotations (T, N+1, 3, 3); tr.times (T,)

Units: SI inside. Modules, one job each:

* :mod:`~flexlearn.physics.cosserat.rod` — the model :class:`CosseratRod`: construction, parameters, strains,
  linearised frequencies; :mod:`~flexlearn.physics.cosserat.properties` — its :class:`Material` and
  :class:`CrossSection`; :mod:`~flexlearn.physics.cosserat.elastic` — elastic energy, internal forces and torques;
* :mod:`~flexlearn.physics.cosserat.integrator` — the LGVI time stepping behind :meth:`CosseratRod.simulate`
  (discrete equations and their derivation; the loop as the stepper class ``Stepper``);
  :mod:`~flexlearn.physics.cosserat.simulation` — what a simulation is given: :class:`SimulationOptions`
  (recording, scheme, backend, tolerances), ``RodSetup`` (loads, damping, start, base) and the rod contract;
* :mod:`~flexlearn.physics.cosserat.newton` — the Cayley–Newton rotation update;
* :mod:`~flexlearn.physics.cosserat.implicit` — the implicit step (``scheme='implicit'``): forces filtered by
  ``M (M + β h² K)⁻¹`` with the Gauss–Newton tangent stiffness K, stable at steps set by accuracy
  (:meth:`CosseratRod.accurate_dt`); the torch reference of its equations;
* :mod:`~flexlearn.physics.cosserat.compiled.lgvi` — the same step loop compiled with numba for runs that need no
  gradient (gravity, point forces, magnets in a uniform field, damping without ``beta``), ≈ 2 µs per step;
  :mod:`~flexlearn.physics.cosserat.compiled.implicit` its implicit force filter (block Cholesky),
  :mod:`~flexlearn.physics.cosserat.compiled.common` what both kernels share (element strains);
* :mod:`~flexlearn.physics.cosserat.state` — :class:`RodState`, :class:`Trajectory`, the supports :class:`Clamp` and
  :class:`Pin`, ``FREE``; :mod:`~flexlearn.physics.cosserat.supports` — supports on any node in the step (held
  directions, driven and sliding ones, their reactions);
  :mod:`~flexlearn.physics.cosserat.polyline` — a rod set up where it is: :class:`Polyline` (initial state from a
  centreline and a normal) and :func:`clamp_at` (a clamp in any orientation), with
  :mod:`~flexlearn.physics.cosserat.rotations` (frames, nearest rotation);
  :mod:`~flexlearn.physics.cosserat.frame_times` — :func:`simulate_at`, states at given times (a camera's frame
  times) at the accurate step;
  :mod:`~flexlearn.physics.cosserat.modes` — the clamped rod's linearised stiffness and frequencies;
  :mod:`~flexlearn.physics.cosserat.benchmark` — the solvers the ``cosseratbench`` suite runs;
* :mod:`~flexlearn.physics.cosserat.context` — :class:`RodContext`, the per-simulation derived quantities (masses,
  inertias, stiffnesses) every load and damping model receives as ``ctx``;
* :mod:`~flexlearn.physics.cosserat.loads`, :mod:`~flexlearn.physics.cosserat.fields` — gravity, point forces,
  magnets and magnetic fields; :mod:`~flexlearn.physics.cosserat.damping` — damping and its estimation;
* :mod:`~flexlearn.physics.cosserat.analytic`, :mod:`~flexlearn.physics.cosserat.experiments` — reference
  solutions and the seed's experiments; :mod:`~flexlearn.physics.cosserat.tip_output` — run an experiment
  and write its tip trajectory (JSON, CSV, PNG; the ``flexlearn-cosserat`` app);
  :mod:`~flexlearn.physics.cosserat.errors` — exceptions.

Seed discrepancies found (details where they matter, in the module docstrings):

* eqs. (14)–(16): ``+2p^j + p^{j−1}`` must be ``+2p^j − p^{j−1}``; ``Δt = t_j − t_{j+1}`` is negative;
  ``Δp`` is defined as a time difference but used as the spatial difference ``p_{a_{i+1}} − p_{a_i}``;
  the loads enter as ``Δt³`` (should be ``h²``) and the world-frame force is rotated by ``O⁻¹``.
* eq. (6) omits the bending energy; its node-averaged shear strain *locks*: a pure bending state carries
  shear energy ``GA l³κ²/8`` per element, so the bending frequencies are too high by ≈ √(1 + (G/E)(l/r)²)
  (×1.84 at l/r = 2.5, ×6 at 5 elements of a L/r = 50 rod). This is what the "frequency shaping" of
  Sec. 5 compensates. We evaluate the strain at the element mid frame ``½(R_i + R_{i+1})`` (no locking,
  γ_corr − 1 < 0.3 % at 20 elements); ``strain='nodes'`` reproduces the seed's eq. (6).
* ``Cay⁻¹(R) = 2(R − I)(R + I)⁻¹`` is the inverse of ``cay(ψ/2)``, not of the stated ``(I+ψ^)/(I−ψ^)``.
* the sums of eq. (7)ff run over ``i = 0 … N+1`` (N+2 nodes) for N elements; nodes are 0 … N.
* eq. (21) lacks a leading minus sign (the minimiser of eq. (19)); R and W are unit-dependent.
* Tables 3–7 are in mg–mm–s units except M: C1, C2 (N → 10⁹ mg mm/s²), J_d (kg m → 10⁹ mg mm; the
  tables say "g mm²") and F^c (= M g in mg/s²) match the stated geometry and materials, but M is printed
  in g/mm, i.e. 1000× too small for that unit system (as printed, the set has frequencies √1000 ≈ 31.6×
  too high). Everything here is computed in SI from geometry and materials.
* Tables 3–7 write E3 = [1, 0, 0] (the rod axis as the first coordinate: C1 = diag(EA, GA, GA)) while the
  text has C1 = diag(GA, GA, EA) with the axis E3 third; we use the text's convention (body z = axis).
* PDMS: the text's E = 365.12 MPa is 365.12 kPa by Table 5; the square rod of Table 7 implies
  E = 3.65 MPa (10× the round rods) and uses the polar moment for torsion (G(I1 + I2), 19 % above
  Saint-Venant's 0.1406 a⁴ for a square); Table 6 gives the tip node F^c = 1.36e5 though Remark 1's
  (M + m/l) g = 2.91e5 mg/s²; Table 7's F^c indices (nodes 3, 4) disagree with the stated magnet position
  (36.1 mm from the tip: node 6 of 10); N45 remanence is 1.32–1.37 T, not mT.
* The seed's time steps (1e-6 s for the 2 mm aluminium rod, 1e-4 s for the square PDMS rod) exceed the
  stability limit of an LGVI whose potential is explicit (the shear–rotation mode 2√(GA/ρI) ≈ 4c_s/d:
  3e-7 s and 1.7e-5 s); ``rotary_inertia='segment'`` (opt-in) raises the limit ~(l/r)/√3-fold.
"""

from flexlearn.physics.cosserat.contact import (
    CylinderContact,
    ObstacleContact,
    PenaltyContact,
    PlaneContact,
    SphereContact,
    contact_forces,
)
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.damping import Damping, DampingEstimator
from flexlearn.physics.cosserat.errors import ArgumentError, CosseratError, IntegrationError
from flexlearn.physics.cosserat.fields import CallableField, Field, HelmholtzField, RotatingField, UniformField
from flexlearn.physics.cosserat.frame_times import simulate_at
from flexlearn.physics.cosserat.loads import (
    EmbeddedMagnet,
    Gravity,
    Load,
    PointForce,
    PointMoment,
    TipMagnet,
    cylinder_magnet,
    magnet_moment,
)
from flexlearn.physics.cosserat.polyline import Polyline, clamp_at
from flexlearn.physics.cosserat.properties import CrossSection, Material
from flexlearn.physics.cosserat.rod import CosseratRod
from flexlearn.physics.cosserat.rod_contact import RodRodContact
from flexlearn.physics.cosserat.simulation import SimulationOptions
from flexlearn.physics.cosserat.state import FREE, Clamp, Pin, RodState, Trajectory

__all__ = [
    "CosseratRod",
    "Material",
    "CrossSection",
    "SimulationOptions",
    "RodContext",
    "RodState",
    "Trajectory",
    "Clamp",
    "Pin",
    "FREE",
    "Polyline",
    "clamp_at",
    "simulate_at",
    "Gravity",
    "PointForce",
    "PointMoment",
    "EmbeddedMagnet",
    "TipMagnet",
    "Load",
    "ObstacleContact",
    "PlaneContact",
    "CylinderContact",
    "SphereContact",
    "contact_forces",
    "PenaltyContact",
    "RodRodContact",
    "magnet_moment",
    "cylinder_magnet",
    "Field",
    "UniformField",
    "RotatingField",
    "HelmholtzField",
    "CallableField",
    "Damping",
    "DampingEstimator",
    "CosseratError",
    "ArgumentError",
    "IntegrationError",
]
