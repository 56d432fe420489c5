"""Flexible links (seed 000, §III): mode shapes, mode selection, observability, reconstruction."""
from flexlearn.physics.modal.link import FlexibleLink, cantilever_roots, frequency_function
from flexlearn.physics.modal.slope_observability import (
    ObservabilityWarning,
    observability,
    optimize_placement,
    slope_matrix,
    slope_node_warnings,
)
from flexlearn.physics.modal.reconstruction import ModalReconstructor
from flexlearn.physics.modal.estimator import FlexibleArmEstimator
from flexlearn.physics.modal.selection import (
    ModeSelectionConfig,
    bandwidth_mode_count,
    chirp,
    convergence_mode_count,
    modal_tip_response,
    select_modes,
)

__all__ = [
    "FlexibleLink", "cantilever_roots", "frequency_function",
    "ObservabilityWarning", "observability", "optimize_placement", "slope_matrix", "slope_node_warnings",
    "ModalReconstructor", "FlexibleArmEstimator",
    "ModeSelectionConfig", "bandwidth_mode_count", "chirp", "convergence_mode_count", "modal_tip_response",
    "select_modes",
]
