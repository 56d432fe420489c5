"""Flexible links (seed 000, §III): mode shapes, mode selection, observability, reconstruction."""

from flexlearn.physics.modal.estimator import EstimatorOptions, FlexibleArmEstimator
from flexlearn.physics.modal.link import FlexibleLink, cantilever_roots, frequency_function
from flexlearn.physics.modal.reconstruction import ModalReconstructor
from flexlearn.physics.modal.selection import (
    ModeSelectionConfig,
    bandwidth_mode_count,
    chirp,
    convergence_mode_count,
    modal_tip_response,
    select_modes,
)
from flexlearn.physics.modal.slope_observability import (
    ObservabilityWarning,
    Placement,
    PlacementOptions,
    observability,
    optimize_placement,
    slope_matrix,
    slope_node_warnings,
)

__all__ = [
    "FlexibleLink",
    "cantilever_roots",
    "frequency_function",
    "ObservabilityWarning",
    "Placement",
    "PlacementOptions",
    "observability",
    "optimize_placement",
    "slope_matrix",
    "slope_node_warnings",
    "ModalReconstructor",
    "EstimatorOptions",
    "FlexibleArmEstimator",
    "ModeSelectionConfig",
    "bandwidth_mode_count",
    "chirp",
    "convergence_mode_count",
    "modal_tip_response",
    "select_modes",
]
