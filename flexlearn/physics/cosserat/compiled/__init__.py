"""Compiled (numba) Cosserat kernels: the fused LGVI step loop (`lgvi`), the force filter of the implicit step
(`implicit`) and what they share (`common`).
"""
