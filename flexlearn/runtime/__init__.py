"""Deployable modules and their files: the fused estimator (`fusion`), the flexible-arm controller (`arm`), the
tip-height PID, frame protocols, export and verified load of model files (see docs/raspberry_pi.md).
"""
