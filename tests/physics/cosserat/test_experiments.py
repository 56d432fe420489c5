"""The seed's experiments as configs (Tables 3–7): every config loads, validates and runs a few steps."""

from pathlib import Path

import pytest
import torch
import yaml

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat.experiments import build_experiment, load_experiment
from flexlearn.physics.cosserat.tip_output import run_experiment

CONF = Path(__file__).resolve().parents[3] / "flexlearn" / "conf" / "cosserat"
NAMES = sorted(p.stem for p in CONF.glob("*.yaml"))


def test_all_seed_experiments_are_configured():
    assert set(NAMES) >= {
        "al_inplane",
        "al_outofplane",
        "pdms_nomagnet",
        "pdms_tipmagnet",
        "pdms_rotating",
        "square_two_magnets",
    }


@pytest.mark.parametrize("name", NAMES)
def test_config_builds_and_runs(name):
    cfg = load_experiment(yaml.safe_load((CONF / f"{name}.yaml").read_text()))
    rod, loads, damping, initial, base = build_experiment(cfg)
    tr = rod.simulate(20 * cfg.dt, cfg.dt, loads=loads, damping=damping, initial=initial, base=base)
    assert tr.positions.shape == (21, cfg.n_elements + 1, 3)
    assert bool(torch.isfinite(tr.positions).all())
    assert float((tr.positions[0, -1] - initial.positions[0, -1]).norm()) < 1e-12


def test_bad_config_names_key():
    data = yaml.safe_load((CONF / "pdms_tipmagnet.yaml").read_text())
    data["youngs_modulus"] = -3.0
    with pytest.raises(ConfigError, match="youngs_modulus"):
        load_experiment(data)
    data = yaml.safe_load((CONF / "pdms_tipmagnet.yaml").read_text())
    data["magnets"][0]["mass"] = -1.0
    with pytest.raises(ConfigError, match="magnet"):
        load_experiment(data)
    data = yaml.safe_load((CONF / "pdms_tipmagnet.yaml").read_text())
    data["colour"] = "red"
    with pytest.raises(ConfigError, match="colour"):
        load_experiment(data)
    data = yaml.safe_load((CONF / "pdms_tipmagnet.yaml").read_text())
    data["strain"] = "linear"
    with pytest.raises(ConfigError, match="strain"):
        load_experiment(data)
    data["strain"] = "geodesic"
    assert build_experiment(load_experiment(data)).rod.strain == "geodesic"


def test_implicit_scheme_from_the_config_runs_at_ten_times_the_step():
    """``scheme: implicit`` in an experiment config: the seed's rotating-field experiment at 10× its step
    (the LGVI's limit there) ends within 0.3 mm of the LGVI run at the configured step after 0.1 s."""
    data = yaml.safe_load((CONF / "pdms_rotating.yaml").read_text())
    ref, _ = run_experiment(load_experiment(data), max_duration=0.1)
    cfg = load_experiment(dict(data, dt=10 * data["dt"], scheme="implicit"))
    tr, info = run_experiment(cfg, max_duration=0.1)
    assert info["scheme"] == "implicit" and info["steps"] == 111
    assert float((tr.tip[-1] - ref.tip[-1]).norm()) < 3e-4
    with pytest.raises(ConfigError, match="scheme"):
        load_experiment(dict(data, scheme="rk4"))
    with pytest.raises(ConfigError, match="implicit_dissipation"):
        load_experiment(dict(data, scheme="implicit", implicit_dissipation=-0.1))
