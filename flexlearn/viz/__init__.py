"""Figures: evaluation maps, training curves, sweep and Optuna summaries."""
