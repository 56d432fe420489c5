"""Attitude of a raw IMU (VQF method, docs/attitude.md): the checked entry point (`orientation`), the offline
filter and its configuration (`offline`), the per-sample kernels (`kernels`) and the TorchScript step (`step`).
"""
