"""The mechanical energy of a rod from its recorded node positions alone, so that any solver's recording (ours, a
peer's, a motion-capture log) is measured the same way; and its largest rise, the energy drift of a passive run.

For node positions x_a (T frames, n = N + 1 nodes) at times t_k, rest element length l, lumped node masses m_a
(half of each adjacent element's ρ A l), axial stiffness EA and bending stiffness EI:

    K   = ½ Σ_a m_a |ẋ_a|²               ẋ from second-order differences of the frames (exact for parabolas)
    U_g = −Σ_a m_a g · x_a
    U_s = Σ_i ½ EA l (|x_{i+1} − x_i| / l − 1)²                                  (stretch)
    U_b = Σ_a ½ EI φ_a² / l        φ_a the turning angle between the chords at interior node a  (bending)

Twist and shear are not seen by positions and are left out (a rope's are small). A passive rod under damping,
friction and contact can only lose energy: a rise of ``E = K + U_g + U_s + U_b`` over its running minimum is energy
a solver created (:func:`largest_rise`), reported in units of ``m_rod |g| L``.

Resolution: this is not any solver's own discrete energy. Each measures bending differently at large turning angles
(a Cayley rod stores ``(2 tan(φ/2))²`` where this counts φ², 19 % more at φ = 1 rad), and frames far apart alias
vibrations into K; a rise of 1e-4 m |g| L in a rope coiling at 60°–120° per element is within that difference.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

__all__ = ["recorded_energy", "largest_rise"]


def recorded_energy(
    times: np.ndarray, positions: np.ndarray, node_masses: np.ndarray, rest_length: float, stiffness: tuple, gravity
) -> Dict[str, np.ndarray]:
    """The energy terms of the module docstring at every recorded frame.

    Args:
        times: (T,) frame times [s], increasing, T ≥ 3.
        positions: (T, n, 3) node positions [m].
        node_masses: (n,) lumped node masses [kg].
        rest_length: the rest length of each element l [m].
        stiffness: ``(EA [N], EI [N·m²])``.
        gravity: (3,) gravitational acceleration [m/s²].

    Returns:
        ``{"kinetic", "gravity", "stretch", "bending", "total"}``, each (T,) [J].

    Raises:
        ValueError: shapes that do not match, or fewer than three frames.
    """
    x = np.asarray(positions, dtype=float)
    t = np.asarray(times, dtype=float)
    m = np.asarray(node_masses, dtype=float)
    if x.ndim != 3 or x.shape[2] != 3 or x.shape[0] != t.shape[0] or x.shape[1] != m.shape[0] or t.shape[0] < 3:
        raise ValueError(
            f"positions {x.shape}, times {t.shape} and node_masses {m.shape}: expected (T, n, 3), (T,), (n,), T ≥ 3"
        )
    ea, ei = stiffness
    velocity = np.gradient(x, t, axis=0, edge_order=2)
    chords = np.diff(x, axis=1)
    lengths = np.linalg.norm(chords, axis=-1)
    unit = chords / np.maximum(lengths, 1e-300)[..., None]
    cosines = np.clip((unit[:, 1:] * unit[:, :-1]).sum(-1), -1.0, 1.0)
    terms = {
        "kinetic": 0.5 * (m[None, :, None] * velocity**2).sum((1, 2)),
        "gravity": -(m[None, :] * (x @ np.asarray(gravity, dtype=float))).sum(1),
        "stretch": 0.5 * ea * rest_length * ((lengths / rest_length - 1.0) ** 2).sum(1),
        "bending": 0.5 * ei / rest_length * (np.arccos(cosines) ** 2).sum(1),
    }
    terms["total"] = terms["kinetic"] + terms["gravity"] + terms["stretch"] + terms["bending"]
    return terms


def largest_rise(times: np.ndarray, energy: np.ndarray, after: float = 0.0) -> float:
    """The largest rise of ``energy`` above its running minimum over the frames at ``t ≥ after`` [J]: zero for a
    passive run that only loses energy (``after``: when a driven end has stopped doing work).

    Args:
        times: (T,) frame times [s].
        energy: (T,) total energy [J].
        after: the first time [s] considered.

    Returns:
        The rise [J] (0 when fewer than two frames are considered).
    """
    e = np.asarray(energy, dtype=float)[np.asarray(times, dtype=float) >= after]
    if e.size < 2:
        return 0.0
    return float((e - np.minimum.accumulate(e)).max())
