"""Compiled (numba) kernels of the LSE forward statics: element residuals and tangents, the condensed
linear solve, the Riemannian Newton loop and its glue to `CPRModel`.
"""
