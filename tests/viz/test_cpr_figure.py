"""trajectory.png of flexlearn-cpr: LSE and the shooting baseline per sample, the pulley named, the distance panel."""

from __future__ import annotations

import numpy as np


def _result(shooting: bool) -> dict:
    rng = np.random.default_rng(0)
    out = {"n_rods": 6, "elements_per_rod": 4, "pulley_position_m": [0.0, 0.25, 0.1], "pulley_tension_N": 0.049}
    for k, name in enumerate(("experiment_I", "experiment_II")):
        p = np.c_[0.01 * np.cos(np.arange(11)), 0.01 * np.sin(np.arange(11)) + 0.004 * k, np.full(11, 0.178)]
        s = p + 1e-4 * rng.standard_normal(p.shape)
        out[name] = {
            "ee_positions_m": p.tolist(),
            "shooting_positions_m": s.tolist() if shooting else None,
            "lse_vs_shooting_at_samples_m": np.linalg.norm(p - s, axis=1).tolist() if shooting else [],
        }
    return out


def test_three_panels_with_the_baseline_two_without(tmp_path):
    import matplotlib.image

    from flexlearn.viz.cpr_figures import write_trajectory_figure

    with_baseline = matplotlib.image.imread(write_trajectory_figure(_result(True), tmp_path / "a.png"))
    without = matplotlib.image.imread(write_trajectory_figure(_result(False), tmp_path / "b.png"))
    assert with_baseline.shape[1] > 1.4 * without.shape[1]  # the LSE-vs-shooting panel is added


def test_the_title_says_what_is_drawn_in_plain_words(tmp_path):
    from PIL import Image

    from flexlearn.viz.cpr_figures import write_trajectory_figure

    with Image.open(write_trajectory_figure(_result(True), tmp_path / "a.png")) as img:
        title = img.text["Title"]
    assert title.startswith("Continuum parallel robot in simulation (6 rods, 4 strain elements each)")
    assert "11 samples" in title and "without load and pulled by a cable over a pulley" in title
    assert not any(word in title for word in ("seed", "Experiment", "Exp.", "Table"))
