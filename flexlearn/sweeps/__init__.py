"""Helpers for Hydra multiruns: collecting the jobs of a sweep into one table and one figure."""

from flexlearn.sweeps.aggregate import aggregate_multirun, collect_jobs

__all__ = ["aggregate_multirun", "collect_jobs"]
