"""Compiled (numba) Cosserat kernels: the fused LGVI step loop (`lgvi`), its Cayley–Newton solve (`cayley`), the
force filter of the implicit step (`implicit`), contact (`contact`), the implicit solve with contact between rods
(`coupled`) and what they share (`common`).

The step loop calls kernels of the other five files, so the six share one numba cache fingerprint: an edit
to any of them drops the cached machine code of all (`flexlearn.numba_cache.refresh_numba_cache`). A file with
compiled kernels left out of it keeps its callers' stale machine code after an edit (a test checks that none is).
"""

from pathlib import Path

from flexlearn.numba_cache import refresh_numba_cache

KERNEL_SOURCES = ("common", "cayley", "contact", "coupled", "curve_pairs", "implicit", "lgvi")
"""The kernel files of this package, relative to it (one cache group)."""

refresh_numba_cache(Path(__file__).parent, KERNEL_SOURCES, "cosserat_kernels")
