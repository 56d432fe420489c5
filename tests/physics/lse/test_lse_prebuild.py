"""The split first compile of the forward statics (compiled.prebuild): it compiles the solver's large kernels at
exactly the argument types the Newton kernel and the solve glue call them with, so that nothing is compiled
twice; and the solves after it equal the torch solver's."""

from __future__ import annotations

import pytest
import torch

from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")


def _newton_call_types(args) -> dict:
    """{callee name: {argument types}} of the kernel calls in `newton_iterations`, from numba's type inference at
    ``args``."""
    from numba.core import compiler, types
    from numba.core.registry import cpu_target
    from numba.core.typed_passes import type_inference_stage

    from flexlearn.physics.lse.compiled import newton as compiled_solver

    interp = compiler.run_frontend(compiled_solver.newton_iterations.py_func)
    typemap, _, calltypes, _ = type_inference_stage(
        cpu_target.typing_context, cpu_target.target_context, interp, args, None
    )
    seen: dict = {}
    for expr, sig in calltypes.items():
        if getattr(expr, "op", "") != "call":
            continue
        fnty = typemap.get(expr.func.name)
        if isinstance(fnty, types.Dispatcher):
            seen.setdefault(fnty.dispatcher.py_func.__name__, set()).add(tuple(sig.args))
    return seen


def test_prebuild_types_are_the_types_of_the_solve():
    from numba import typeof

    from flexlearn.physics.lse import CPRModel
    from flexlearn.physics.lse.compiled import newton as compiled_solver
    from flexlearn.physics.lse.compiled.prebuild import planned_signatures

    planned = planned_signatures()
    model = CPRModel.from_config({"rod": {"n_elements": 3}})
    th = torch.zeros(model.motor_axis.shape[0], dtype=torch.float64)
    calls = []
    original = compiled_solver.newton_iterations

    def spy(*args):
        calls.append(tuple(typeof(a) for a in args))
        return original(*args)

    import flexlearn.physics.lse.compiled.problem as problem

    problem.newton_iterations, real = spy, problem.newton_iterations
    try:
        eq = model.solve(th, model.default_loads(True))
        model.solve(th + 1e-3, model.default_loads(True), init=eq)
    finally:
        problem.newton_iterations = real
    assert calls and len(set(calls)) == 1
    seen = _newton_call_types(calls[0])
    for name in ("residual_pass", "tangent_pass", "condense", "condensed_apply"):
        assert seen[name] == {planned[name]}, name
    for kernel in (compiled_solver.base_poses, compiled_solver.predict_state):
        assert planned[kernel.py_func.__name__] in set(map(tuple, kernel.signatures))


def test_prebuild_does_nothing_when_the_kernels_are_plain_functions(monkeypatch):
    """NUMBA_DISABLE_JIT=1 makes every kernel a plain Python function: nothing to compile, no error."""
    from flexlearn.physics.lse.compiled import newton as compiled_solver
    from flexlearn.physics.lse.compiled import prebuild as compiled_prebuild

    monkeypatch.setattr(compiled_prebuild, "residual_pass", compiled_solver.residual_pass.py_func)
    assert compiled_prebuild.prebuild() == "no numba"
