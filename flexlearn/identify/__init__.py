"""Identification of physical parameters through the differentiable physics models.

Problems (recording + differentiable model + parameters): :class:`~flexlearn.identify.modal.ModalLinkProblem`
(flexible link, seed 000), :class:`~flexlearn.identify.cosserat.CosseratTipProblem` (Cosserat rod, seed 001),
:class:`~flexlearn.identify.lse.CprStiffnessProblem` (continuum parallel robot, seed 003). The fit is a
LightningModule (:class:`~flexlearn.identify.task.IdentificationTask`: Levenberg–Marquardt or gradient
descent) with positivity/bounds by reparametrization (:mod:`~flexlearn.identify.params`) and a Hessian
uncertainty/identifiability report (:mod:`~flexlearn.identify.fit`); :func:`~flexlearn.identify.run.identify`
runs one from a composed ``train`` config (``task=identify_*``). A new problem implements the
:class:`~flexlearn.identify.fit.IdentificationProblem` protocol. See docs/identify.md.
"""

from flexlearn.identify.fit import IdentificationProblem, StagedProblem
from flexlearn.identify.params import ParameterSet, ParamSpec
from flexlearn.identify.task import IdentificationTask

__all__ = ["IdentificationProblem", "StagedProblem", "ParamSpec", "ParameterSet", "IdentificationTask"]
