"""The first compile of the compiled forward statics, split over two processes.

`newton_iterations` (:mod:`flexlearn.physics.lse.compiled.newton`) calls four large kernels that do not call one
another: the residual pass ``residual_pass`` (element residuals,
:func:`~flexlearn.physics.lse.compiled.elements.element_into`), the tangent ``tangent_pass``
(:func:`~flexlearn.physics.lse.compiled.elements.tangent_nodes_into`) and the condensation ``condense`` /
``condensed_apply`` (:mod:`flexlearn.physics.lse.compiled.condense`). On a cold cache, :func:`prebuild` compiles them,
with ``base_poses`` and ``predict_state``, at the argument types `newton_iterations` and
:mod:`flexlearn.physics.lse.compiled.problem` use, on two processes at once (:mod:`flexlearn.parallel_compile`); the
solve that follows compiles only `newton_iterations` itself and links the rest from numba's cache. The types do not
depend on the robot's size: one prebuild serves every robot. A type that differed from the solve's would only cost time
(`newton_iterations` would compile that kernel again); ``tests/physics/lse/test_lse_prebuild.py`` checks them against
numba's type inference of `newton_iterations`. ``scripts/bench_lse_compile.py`` measures the effect.
"""

from __future__ import annotations

from typing import Callable

from flexlearn.parallel_compile import compile_side_by_side
from flexlearn.physics.lse.compiled.condense import base_columns, condense, condensed_apply
from flexlearn.physics.lse.compiled.elements import alloc_parts
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.compiled.newton import base_poses, predict_state, residual_pass, tangent_pass

__all__ = ["planned_signatures", "prebuild"]


def _types():
    """Numba types: C-contiguous float64 arrays of rank 1-4, an int64 vector, float64, bool, int64."""
    from numba import types  # numba is optional: imported only when prebuild runs with it

    c1, c2, c3, c4 = (types.Array(types.float64, nd, "C") for nd in (1, 2, 3, 4))
    return c1, c2, c3, c4, types.Array(types.int64, 1, "C"), types.float64, types.boolean, types.int64


def _returns(dispatcher, args) -> object:
    """Compile (or load) ``dispatcher`` at ``args`` and return the numba type it returns."""
    dispatcher.compile(args)
    return next(s.return_type for s in dispatcher.nopython_signatures if tuple(s.args) == tuple(args))


def _compile_residual_side() -> dict:
    """What `newton_iterations` calls first (the base poses, the residual) and the condensation (factors, right-hand
    sides). Returns {kernel name: argument types}."""
    c1, c2, c3, c4, i8, f8, b1, int64 = _types()
    done = {
        "base_poses": (c3, c2, i8, c1),  # base0, s_world, rod_motor, theta
        "residual_pass": (c3, c2, c4, c3, c3, c3, c1, c2, c2, c3, c1, c1, f8, b1),
    }
    base_poses.compile(done["base_poses"])
    residual_pass.compile(done["residual_pass"])
    done["condense"] = (c4, c2)  # hel, kee
    factors = _returns(condense, done["condense"])
    x0 = _returns(base_columns, (c2, i8, int64))  # dz0, rod_motor, n_motors
    done["condensed_apply"] = (c4, factors, c2, c1, x0)  # hel, factors, res, res_ee, x0
    condensed_apply.compile(done["condensed_apply"])
    return done


def _compile_tangent_side() -> dict:
    """The tangent and the warm-start predictor. Returns {kernel name: argument types}."""
    c1, c2, c3, c4, i8, f8, b1, int64 = _types()
    parts = _returns(alloc_parts, (int64, int64))  # r, n (intp)
    done = {
        "tangent_pass": (parts, c3, c1, c2, c3, c1, c1, c2, c2, b1),  # parts, adinv, h, kd, body, me, fe, dfdp
        "predict_state": (c2, c4, c3, c3, c2, c1, f8),
    }  # g_ee, g_int, beta, sens, dθ, max_rot
    tangent_pass.compile(done["tangent_pass"])
    predict_state.compile(done["predict_state"])
    return done


def planned_signatures() -> dict:
    """{kernel name: argument types} of every kernel :func:`prebuild` compiles (compiling them here, serially)."""
    return {**_compile_residual_side(), **_compile_tangent_side()}


def prebuild() -> str:
    """Compile the kernels of the module docstring (two processes when possible); returns the mode of
    :func:`~flexlearn.parallel_compile.compile_side_by_side`, or ``"no numba"`` (also under ``NUMBA_DISABLE_JIT=1``)."""
    if not HAVE_NUMBA or not hasattr(residual_pass, "compile"):  # no numba, or NUMBA_DISABLE_JIT=1 (plain functions)
        return "no numba"
    here: list[Callable[[], object]] = [_compile_residual_side]
    there: list[Callable[[], object]] = [_compile_tangent_side]
    return compile_side_by_side(here, there)
