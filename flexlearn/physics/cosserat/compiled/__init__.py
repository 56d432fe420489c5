"""Compiled (numba) Cosserat kernels: the fused LGVI step loop (`lgvi`), its Cayley–Newton solve (`cayley`), the
force filter of the implicit step (`implicit`) and what they share (`common`).

The step loop inlines kernels of the other three files, so the four share one numba cache fingerprint: an edit
to any of them drops the cached machine code of all (`flexlearn.numba_cache.refresh_numba_cache`).
"""

from pathlib import Path

from flexlearn.numba_cache import refresh_numba_cache

KERNEL_SOURCES = ("common", "cayley", "implicit", "lgvi")
"""The kernel files of this package, relative to it (one cache group)."""

refresh_numba_cache(Path(__file__).parent, KERNEL_SOURCES, "cosserat_kernels")
