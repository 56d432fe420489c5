"""The energy of a recording from positions alone: exact where it can be (free fall, uniform stretch), the
continuum's bending energy on a fine arc, and the rise that a passive run cannot have."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flexlearn.physics.cosserat.recorded_energy import largest_rise, recorded_energy

G = np.array([0.0, 0.0, -9.81])


def _masses(n_elements: int, element_mass: float) -> np.ndarray:
    m = np.full(n_elements + 1, element_mass)
    m[[0, -1]] *= 0.5
    return m


def test_a_falling_rod_keeps_its_energy_to_round_off():
    """A straight, unstretched rod thrown and falling (positions on parabolas, 31 uneven frames): K + U_g is
    constant, so no rise."""
    times = np.sort(np.random.default_rng(0).uniform(0.0, 0.5, 31))
    nodes = np.stack([np.linspace(0.0, 0.3, 11), np.zeros(11), np.zeros(11)], -1)
    v0 = np.array([0.4, 0.1, 2.0])
    x = nodes[None] + times[:, None, None] * v0 + 0.5 * times[:, None, None] ** 2 * G
    e = recorded_energy(times, x, _masses(10, 0.002), 0.03, (10.0, 1e-4), G)
    assert np.ptp(e["total"]) < 1e-12 * abs(e["kinetic"][0])
    assert e["stretch"].max() < 1e-20 and e["bending"].max() < 1e-20
    assert largest_rise(times, e["total"]) < 1e-12 * abs(e["kinetic"][0])


def test_stretch_and_bending_energies_of_a_still_rod():
    """Uniformly stretched by ε: ½ EA L ε² exactly; an arc of curvature κ at 60 elements: ½ EI κ² L within 2 %."""
    n, length, ea, ei = 60, 0.6, 50.0, 2e-4
    times = np.array([0.0, 0.1, 0.2])
    straight = np.stack([np.linspace(0.0, 1.01 * length, n + 1), np.zeros(n + 1), np.zeros(n + 1)], -1)
    e = recorded_energy(times, np.repeat(straight[None], 3, 0), _masses(n, 1e-3), length / n, (ea, ei), G * 0)
    assert e["stretch"][0] == pytest.approx(0.5 * ea * length * 0.01**2, rel=1e-9)
    kappa = 4.0
    s = np.linspace(0.0, length, n + 1)
    arc = np.stack([np.sin(kappa * s) / kappa, np.zeros(n + 1), (1.0 - np.cos(kappa * s)) / kappa], -1)
    e = recorded_energy(times, np.repeat(arc[None], 3, 0), _masses(n, 1e-3), length / n, (ea, ei), G * 0)
    assert e["bending"][0] == pytest.approx(0.5 * ei * kappa**2 * length, rel=0.02)
    assert e["kinetic"].max() < 1e-30


def test_the_largest_rise_is_measured_above_the_running_minimum():
    times = np.linspace(0.0, 1.0, 11)
    energy = np.array([5.0, 4.0, 3.0, 3.5, 2.0, 2.0, 1.0, 1.2, 1.1, 0.5, 0.9])
    assert largest_rise(times, energy) == pytest.approx(0.5)
    assert largest_rise(times, energy, after=0.55) == pytest.approx(0.4)
    assert largest_rise(times, np.linspace(3.0, 1.0, 11)) == 0.0
    assert math.isclose(largest_rise(times, energy, after=2.0), 0.0)


def test_mismatched_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="node_masses"):
        recorded_energy(np.arange(3.0), np.zeros((3, 5, 3)), np.ones(4), 0.1, (1.0, 1.0), G)


def test_the_contact_energy_script_reads_a_results_folder(tmp_path):
    """scripts/bench_contact_energy.py on a results folder holding a capstan rope that stays where it starts (a
    still run: no rise, nothing lost) and one that is dropped by 1 cm between two frames and comes back (a rise)."""
    pytest.importorskip("cosseratbench", reason="cosseratbench is not installed (pip install flexlearn[bench])")
    import json
    import subprocess
    import sys
    from pathlib import Path

    from cosseratbench import registry
    from cosseratbench.trajectory import Trajectory

    rod = registry.load_experiment("capstan").scenario.rods[0]
    nodes, directors = rod.nodes(20), rod.directors(20)
    times = np.linspace(0.0, 2.0, 11)
    for solver, shift in (("still", 0.0), ("jumpy", 0.01)):
        x = np.repeat(nodes[None], 11, 0)
        x[6:8, :, 2] -= shift  # down and back up: energy lost, then regained
        folder = tmp_path / "capstan" / "default" / solver
        folder.mkdir(parents=True)
        Trajectory(times, (x,), (np.repeat(directors[None], 11, 0),)).save(folder / "trajectory.npz")
        (folder / "result.json").write_text(json.dumps({"n_elements": 20, "observations": {"max_penetration": 0.0}}))
    script = Path(__file__).resolve().parents[3] / "scripts" / "bench_contact_energy.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "--experiments", "capstan"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["capstan"]
    assert runs["still"]["energy_rise"] < 1e-9 and abs(runs["still"]["energy_lost"]) < 1e-9
    assert runs["jumpy"]["energy_rise"] > 1e-3 and runs["jumpy"]["max_penetration"] == 0.0
