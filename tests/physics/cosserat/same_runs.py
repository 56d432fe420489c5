"""The check that a run in the fused kernel is the tensor path's run, shared by the kernel tests."""

from __future__ import annotations


def assert_same_runs(kernel, tensor, reactions: bool = True) -> float:
    """Positions (1e-9 of the motion), rotations (1e-9), final velocities (1e-8) and, with ``reactions``, the
    supports' reactions (1e-8 of their largest) of two trajectories of one run equal to round-off.

    Args:
        kernel: the fused kernel's trajectory.
        tensor: the tensor path's trajectory.
        reactions: also compare the supports' reactions.

    Returns:
        How far the tensor path's run moved [m] (asserted > 1e-5: the comparison compares something).
    """
    a, b = kernel, tensor
    moved = float((b.positions[-1] - b.positions[0]).abs().max())
    assert moved > 1e-5
    assert float((a.positions - b.positions).abs().max()) < 1e-9 * max(moved, 1e-3)
    assert float((a.rotations - b.rotations).abs().max()) < 1e-9
    if reactions:
        scale = float(b.reactions.abs().max())
        assert scale > 0 and float((a.reactions - b.reactions).abs().max()) < 1e-8 * scale
    for x, y in ((a.final.velocities, b.final.velocities), (a.final.angular_velocities, b.final.angular_velocities)):
        assert float((x - y).abs().max()) <= 1e-8 * max(float(y.abs().max()), 1e-12)
    return moved
