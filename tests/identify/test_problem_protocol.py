"""The three identification problems satisfy the problem protocols the fit and the task are typed with."""

from flexlearn.identify.cosserat import CosseratIdConfig, CosseratTipProblem
from flexlearn.identify.fit import IdentificationProblem, StagedProblem
from flexlearn.identify.lse import CprStiffnessProblem, LseIdConfig
from flexlearn.identify.modal import ModalIdConfig, ModalLinkProblem
from flexlearn.identify.task import IdentificationTask


def test_problems_satisfy_the_protocols():
    rod = CosseratTipProblem(CosseratIdConfig(steps=24, horizons=(0.5, 1.0)))
    link = ModalLinkProblem(ModalIdConfig(duration=0.5, seed=3))
    cpr = CprStiffnessProblem(
        LseIdConfig(n_elements=2, truth_elements=2, n_phases=2, actuation_scale=0.3, experiments=("pulley",))
    )
    for prob in (rod, link, cpr):
        assert isinstance(prob, IdentificationProblem)
        assert prob.jacobian_mode in ("forward", "reverse")
    assert isinstance(rod, StagedProblem)
    assert not isinstance(link, StagedProblem) and not isinstance(cpr, StagedProblem)
    assert IdentificationTask(rod).horizons == (0.5, 1.0)
    assert IdentificationTask(link).horizons == (1.0,)
