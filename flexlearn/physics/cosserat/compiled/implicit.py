"""The force filter of the implicit Cosserat step, compiled with numba: eq. (1) of
:mod:`flexlearn.physics.cosserat.implicit` (the torch reference, which holds the equations),
``F̃ = M (M + β h² K)⁻¹ F`` with K the block-tridiagonal Gauss–Newton stiffness of eq. (2), solved by a
block Cholesky factorisation (6×6 blocks, O(n)) instead of a dense solve. Called by the fused step loop
(:func:`flexlearn.physics.cosserat.compiled.lgvi.run`) for every state when ``beta_h2 > 0``; tested equal to the
reference to round-off (tests/physics/cosserat/test_implicit.py).

Block Cholesky of ``A`` (diagonal blocks D_a, upper blocks E_a = A[a, a+1]): ``L_a L_aᵀ = D_a − W_{a−1}ᵀ
W_{a−1}``, ``W_a = L_a⁻¹ E_a``; then ``L_a y_a = F_a − W_{a−1}ᵀ y_{a−1}`` forwards and ``L_aᵀ x_a = y_a −
W_a x_{a+1}`` backwards.

Shapes: R (B, n, 3, 3), p (B, n, 3), C1, C2 (B, N, 3), l (B, N), mass (B, n), inertia (B, n, 3);
work arrays D, W (n, 6, 6), y (n, 6), G (6, 12), Ke (12, 12); force, torque (n, 3) of rod b, filtered in place.
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.cosserat.compiled.common import (
    LOG_CURVATURE,
    element_strain,
    geodesic_apply,
    geodesic_jacobian,
    log_curvature_apply,
    njit,
)


@njit(cache=True, inline="always", error_model="numpy")
def _hat_into(G, col, x0, x1, x2, s):
    """G[:, col:col+3] = s · x^ (the cross-product matrix of x)."""
    G[0, col], G[0, col + 1], G[0, col + 2] = 0.0, -s * x2, s * x1
    G[1, col], G[1, col + 1], G[1, col + 2] = s * x2, 0.0, -s * x0
    G[2, col], G[2, col + 1], G[2, col + 2] = -s * x1, s * x0, 0.0


@njit(cache=True, inline="always", error_model="numpy")
def _add_hat(G, col, x0, x1, x2, s):
    """G[:, col:col+3] += s · x^."""
    G[0, col + 1] -= s * x2
    G[0, col + 2] += s * x1
    G[1, col] += s * x2
    G[1, col + 2] -= s * x0
    G[2, col] -= s * x1
    G[2, col + 1] += s * x0


@njit(cache=True, error_model="numpy")
def _accumulate(G, c0, c1, c2, w, Ke):
    """Ke += w Gᵀ diag(c) G (12 × 12, symmetric)."""
    for r in range(12):
        g0, g1, g2 = w * c0 * G[0, r], w * c1 * G[1, r], w * c2 * G[2, r]
        if g0 == 0.0 and g1 == 0.0 and g2 == 0.0:
            continue
        for c in range(12):
            Ke[r, c] += g0 * G[0, c] + g1 * G[1, c] + g2 * G[2, c]


@njit(cache=True, error_model="numpy")
def _geodesic_rows(G, f, g, half_l):
    """Rows 0–2 of G (the linear-mean shear Jacobian ∂g) become ``A ∂g + J (l/2) ∂κ`` (∂κ in rows 3–5): the
    Jacobian of the geodesic strain ``A(f) g`` (``J = ∂(A g)/∂f``, ∂f = (l/2) ∂κ; f, g 3-tuples)."""
    j0, j1, j2 = geodesic_jacobian(f, g)
    for col in range(12):
        a0, a1, a2 = geodesic_apply(f, (G[0, col], G[1, col], G[2, col]))
        k0, k1, k2 = G[3, col] * half_l, G[4, col] * half_l, G[5, col] * half_l
        G[0, col] = a0 + j0[0] * k0 + j0[1] * k1 + j0[2] * k2
        G[1, col] = a1 + j1[0] * k0 + j1[1] * k1 + j1[2] * k2
        G[2, col] = a2 + j2[0] * k0 + j2[1] * k1 + j2[2] * k2


@njit(cache=True, error_model="numpy")
def _log_rows(G, f0, f1, f2):
    """Rows 0–2 of G ← P · rows 3–5 (P = α I + (α'/t) f fᵀ of the log curvature, ∂κ = P ∂(2f/l))."""
    for c in range(12):
        G[0, c], G[1, c], G[2, c] = log_curvature_apply(f0, f1, f2, G[3, c], G[4, c], G[5, c])


@njit(cache=True, error_model="numpy")
def _element(R, p, C1, C2, l, strain_code, b, i, G, Ke):
    """Ke = the element stiffness of eq. (2) of element i of rod b (12 × 12); G a (6, 12) work array."""
    (xL0, xL1, xL2, xR0, xR1, xR2, _g0, _g1, _g2, _h0, _h1, _h2, f0, f1, f2, _tr, il) = element_strain(
        R, p, l, strain_code, b, i
    )
    Ke[:, :] = 0.0
    G[:, :] = 0.0
    for r in range(3):  # bending: [−A_pᵀ, 0, A_p, 0] / l,
        fr = f0 if r == 0 else (f1 if r == 1 else f2)  # A_p = I + f^ + f fᵀ, −A_pᵀ = −(I + f fᵀ) + f^
        for c in range(3):
            fc = f0 if c == 0 else (f1 if c == 1 else f2)
            a = (fr * fc + (1.0 if r == c else 0.0)) * il
            G[r, 6 + c] = a
            G[r, c] = -a
    _add_hat(G, 6, f0, f1, f2, il)
    _add_hat(G, 0, f0, f1, f2, il)
    for r in range(3):  # keep ∂(2f/l) for the geodesic strain's Jacobian
        for c in range(12):
            G[3 + r, c] = G[r, c]
    if strain_code & LOG_CURVATURE:  # ∂κ = P ∂(2f/l) (strains.log_curvature)
        _log_rows(G, f0, f1, f2)
    _accumulate(G, C2[b, i, 0], C2[b, i, 1], C2[b, i, 2], l[b, i], Ke)
    for r in range(3):
        for c in range(12):
            G[r, c] = 0.0
    strain_code = strain_code & 3
    if strain_code > 0:
        s = 0.5 * il
        _hat_into(G, 0, xL0, xL1, xL2, s)
        _hat_into(G, 6, xR0, xR1, xR2, s)
        for r in range(3):
            for c in range(3):
                st = s * (R[b, i, c, r] + R[b, i + 1, c, r])  # S = (R_i + R_{i+1})ᵀ
                G[r, 3 + c] = -st
                G[r, 9 + c] = st
        if strain_code == 2:
            _geodesic_rows(G, (f0, f1, f2), (s * (xL0 + xR0), s * (xL1 + xR1), s * (xL2 + xR2)), 0.5 * l[b, i])
        _accumulate(G, C1[b, i, 0], C1[b, i, 1], C1[b, i, 2], l[b, i], Ke)
    else:
        for side in range(2):
            G[:3, :] = 0.0
            node = i + side
            if side == 0:
                _hat_into(G, 0, xL0, xL1, xL2, il)
            else:
                _hat_into(G, 6, xR0, xR1, xR2, il)
            for r in range(3):
                for c in range(3):
                    G[r, 3 + c] = -il * R[b, node, c, r]
                    G[r, 9 + c] = il * R[b, node, c, r]
            _accumulate(G, C1[b, i, 0], C1[b, i, 1], C1[b, i, 2], 0.5 * l[b, i], Ke)


@njit(cache=True, error_model="numpy")
def _chol6(D):
    """In place: the lower Cholesky factor of the 6×6 block D (upper part left as it is)."""
    for j in range(6):
        s = D[j, j]
        for k in range(j):
            s -= D[j, k] * D[j, k]
        d = np.sqrt(s)
        D[j, j] = d
        for i in range(j + 1, 6):
            t = D[i, j]
            for k in range(j):
                t -= D[i, k] * D[j, k]
            D[i, j] = t / d


@njit(cache=True, inline="always", error_model="numpy")
def _lower_solve(L, x):
    """X ← L⁻¹ x for the 6-vector x."""
    for i in range(6):
        t = x[i]
        for k in range(i):
            t -= L[i, k] * x[k]
        x[i] = t / L[i, i]


@njit(cache=True, inline="always", error_model="numpy")
def _upper_solve(L, x):
    """X ← L⁻ᵀ x for the 6-vector x."""
    for i in range(5, -1, -1):
        t = x[i]
        for k in range(i + 1, 6):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]


@njit(cache=True, inline="always", error_model="numpy")
def _velocity(v, pi, inertia, held, b, a, c):
    """Component c of node a's half-step velocity (ω = pi / J for c < 3, then v); 0 in a held direction."""
    if held[a, c] > 0.0:
        return 0.0
    return pi[b, a, c] / inertia[b, a, c] if c < 3 else v[b, a, c - 3]


@njit(cache=True, error_model="numpy")
def _subtract_damping(D, W, v, pi, inertia, scale, held, b, force, torque, y):
    """force/torque −= scale · (A x) with A the assembled block-tridiagonal (D, W = E) before M is added and
    x the half-step velocities in the free directions: the numerical damping of eq. (4), not applied to the
    held directions (y is work space)."""
    n = force.shape[0]
    for a in range(n):
        for r in range(6):
            t = 0.0
            for c in range(6):
                t += D[a, r, c] * _velocity(v, pi, inertia, held, b, a, c)
                if a + 1 < n:
                    t += W[a, r, c] * _velocity(v, pi, inertia, held, b, a + 1, c)
                if a >= 1:
                    t += W[a - 1, c, r] * _velocity(v, pi, inertia, held, b, a - 1, c)
            y[a, r] = t
    for a in range(n):
        for c in range(3):
            if held[a, c] == 0.0:
                torque[a, c] -= scale * y[a, c]
            if held[a, 3 + c] == 0.0:
                force[a, c] -= scale * y[a, 3 + c]


@njit(cache=True, error_model="numpy")
def _drop_held(D, W, held):
    """Zero the rows and columns of the held directions in the blocks (D, W): they are no degrees of freedom
    (``P A P``; M on their diagonal is added by the caller)."""
    n = D.shape[0]
    for a in range(n):
        for j in range(6):
            if held[a, j] > 0.0:
                for k in range(6):
                    D[a, j, k] = 0.0
                    D[a, k, j] = 0.0
                    W[a, j, k] = 0.0
                    if a >= 1:
                        W[a - 1, k, j] = 0.0


@njit(cache=True, error_model="numpy")
def _add_mass_coupling(D, W, coupling, held, b):
    """The consistent mass's element couplings c = ρ A l / 6 (eq. (6) of the torch reference) on the position
    directions of the blocks (D, W): −c on both nodes' diagonals, +c between them, only in free directions."""
    for i in range(D.shape[0] - 1):
        c = coupling[b, i]
        if c == 0.0:
            continue
        for d in range(3, 6):
            free_a, free_b = held[i, d] == 0.0, held[i + 1, d] == 0.0
            if free_a:
                D[i, d, d] -= c
            if free_b:
                D[i + 1, d, d] -= c
            if free_a and free_b:
                W[i, d, d] += c


# long: 63 lines of code; its docstring documents all 23 parameters
@njit(cache=True, error_model="numpy")
def filter_forces(
    R, p, C1, C2, l, mass, inertia, strain_code, beta_h2, held, b, force, torque, D, W, y, G, Ke, damping_c, v, pi,
    coupling, blocks,
):  # fmt: skip
    """Eq. (1) for rod b: ``force`` (world) and ``torque`` (body) (n, 3) replaced by ``M (M + βh²K + h C)⁻¹ F``
    in the free directions, left as they are in the ``held`` ones (``(P A P + H M) x = P F``); with
    ``damping_c`` = c > 0 the force first gets the numerical damping ``−c K (pi/J, v)`` of eq. (4) (the caller
    passes β h² + h c/2 as ``beta_h2``). Returns False when the matrix is not positive definite (a non-finite
    state).

    Args:
        R: Node rotations, shape (B, n, 3, 3).
        p: Node positions [m], shape (B, n, 3).
        C1: Shear and extension stiffnesses [N], shape (B, N, 3).
        C2: Bending and torsion stiffnesses [N·m²], shape (B, N, 3).
        l: Element rest lengths [m], shape (B, N).
        mass: Node masses [kg], shape (B, n).
        inertia: Principal node inertias [kg·m²], shape (B, n, 3).
        strain_code: The strain model (:data:`~flexlearn.physics.cosserat.compiled.common.STRAIN_CODES`).
        beta_h2: β h² [s²] (plus h c/2 with numerical damping); must be > 0.
        held: 1 for a held direction, else 0, shape (n, 6) in (η, δp) order (world axes for δp).
        b: Rod index in the batch.
        force: World node forces [N] of rod b, shape (n, 3), filtered in place.
        torque: Body node torques [N·m] of rod b, shape (n, 3), filtered in place.
        D: Work array of the diagonal blocks, shape (n, 6, 6).
        W: Work array of the off-diagonal blocks, shape (n, 6, 6).
        y: Work array, shape (n, 6).
        G: Work array, shape (6, 12).
        Ke: Work array of the element stiffness, shape (12, 12).
        damping_c: Numerical damping coefficient c [s]; 0 for none.
        v: Half-step node velocities [m/s], shape (B, n, 3) (used only when ``damping_c`` > 0).
        pi: Half-step angular momenta J ω, shape (B, n, 3) (used only when ``damping_c`` > 0).
        coupling: The consistent mass's element coupling ρ A l / 6 [kg], shape (B, N); zeros for the lumped mass.
        blocks: The contacts' position blocks h C [kg] of eq. (5), shape (B, n, 3, 3); a (1, 1, 3, 3) placeholder
            without contacts.

    Returns:
        True on success, False when the matrix is not positive definite.
    """
    assemble_stiffness(R, p, C1, C2, l, strain_code, beta_h2, b, D, W, G, Ke)
    return solve_assembled(mass, inertia, beta_h2, held, b, force, torque, D, W, y, damping_c, v, pi, coupling, blocks)


@njit(cache=True, error_model="numpy")
def assemble_stiffness(R, p, C1, C2, l, strain_code, beta_h2, b, D, W, G, Ke):
    """The blocks of ``β h² K`` of rod b (eq. (2)): diagonal ``D`` and upper ``W`` (n, 6, 6), the first half of
    :func:`filter_forces` (arguments as there); a step that solves again with other contact blocks keeps a copy.

    Args:
        R: The nodes' rotations (B, n, 3, 3).
        p: Their positions [m] (B, n, 3).
        C1: The elements' shear and extension stiffness [N] (B, N, 3).
        C2: Their bending and torsion stiffness [N·m²] (B, N, 3).
        l: Their rest lengths [m] (B, N).
        strain_code: The strain model.
        beta_h2: β h² [s²].
        b: Rod index in the batch.
        D: Diagonal blocks, shape (n, 6, 6), written.
        W: Upper blocks, shape (n, 6, 6), written.
        G: Work array, shape (6, 12).
        Ke: Work array, shape (12, 12).
    """
    n = D.shape[0]
    for a in range(n):
        D[a, :, :] = 0.0
        W[a, :, :] = 0.0
    for i in range(n - 1):
        _element(R, p, C1, C2, l, strain_code, b, i, G, Ke)
        for r in range(6):
            for c in range(6):
                D[i, r, c] += beta_h2 * Ke[r, c]
                D[i + 1, r, c] += beta_h2 * Ke[6 + r, 6 + c]
                W[i, r, c] = beta_h2 * Ke[r, 6 + c]  # E_i, turned into W_i below


@njit(cache=True, error_model="numpy")
def solve_assembled(mass, inertia, beta_h2, held, b, force, torque, D, W, y, damping_c, v, pi, coupling, blocks):
    """The second half of :func:`filter_forces` from the blocks of :func:`assemble_stiffness` (overwritten):
    numerical damping, contact blocks, mass, block Cholesky factorisation and solve.

    Args:
        mass: Node masses [kg], shape (B, n).
        inertia: Principal node inertias [kg·m²], shape (B, n, 3).
        beta_h2: β h² [s²] (plus h c/2 with numerical damping).
        held: 1 for a held direction, else 0, shape (n, 6).
        b: Rod index in the batch.
        force: World node forces [N] of rod b, shape (n, 3), filtered in place.
        torque: Body node torques [N·m] of rod b, shape (n, 3), filtered in place.
        D: The diagonal blocks of β h² K, shape (n, 6, 6).
        W: Its upper blocks, shape (n, 6, 6).
        y: Work array, shape (n, 6).
        damping_c: Numerical damping coefficient c [s]; 0 for none.
        v: Half-step node velocities [m/s], shape (B, n, 3).
        pi: Half-step angular momenta J ω, shape (B, n, 3).
        coupling: The consistent mass's element coupling [kg], shape (B, N).
        blocks: The contacts' position blocks h C [kg], shape (B, n, 3, 3), or a (1, 1, 3, 3) placeholder.

    Returns:
        True on success, False when the matrix is not positive definite.
    """
    if not factor_assembled(mass, inertia, beta_h2, held, b, force, torque, D, W, y, damping_c, v, pi, coupling,
                            blocks):  # fmt: skip
        return False
    substitute(D, W, y, 0)
    write_filtered(mass, inertia, held, b, force, torque, y)
    return True


@njit(cache=True, error_model="numpy")
def factor_assembled(mass, inertia, beta_h2, held, b, force, torque, D, W, y, damping_c, v, pi, coupling, blocks):
    """:func:`solve_assembled` up to the factorisation: the numerical damping subtracted from the forces, the
    contact blocks and the mass added, ``D``, ``W`` overwritten with the block Cholesky factor and ``y`` with the
    right-hand side.

    Args:
        mass: Node masses [kg], shape (B, n).
        inertia: Principal node inertias [kg·m²], shape (B, n, 3).
        beta_h2: β h² [s²] (plus h c/2 with numerical damping).
        held: 1 for a held direction, else 0, shape (n, 6).
        b: Rod index in the batch.
        force: World node forces [N] of rod b, shape (n, 3) (the numerical damping subtracted in place).
        torque: Body node torques [N·m] of rod b, shape (n, 3) (likewise).
        D: The diagonal blocks of β h² K, shape (n, 6, 6); out, the factor's.
        W: Its upper blocks, shape (n, 6, 6); out, the factor's.
        y: Out, the right-hand side, shape (n, 6).
        damping_c: Numerical damping coefficient c [s]; 0 for none.
        v: Half-step node velocities [m/s], shape (B, n, 3).
        pi: Half-step angular momenta J ω, shape (B, n, 3).
        coupling: The consistent mass's element coupling [kg], shape (B, N).
        blocks: The contacts' position blocks h C [kg], shape (B, n, 3, 3), or a (1, 1, 3, 3) placeholder.

    Returns:
        False when the matrix is not positive definite.
    """
    n = force.shape[0]
    if damping_c > 0.0:
        _subtract_damping(D, W, v, pi, inertia, damping_c / beta_h2, held, b, force, torque, y)
    if blocks.shape[1] == n:  # the contacts' h C on the position blocks (eq. (5)), not in the damping's K
        for a in range(n):
            for r in range(3):
                for c in range(3):
                    D[a, 3 + r, 3 + c] += blocks[b, a, r, c]
    _drop_held(D, W, held)
    for a in range(n):
        for c in range(3):
            D[a, c, c] += inertia[b, a, c]
            D[a, 3 + c, 3 + c] += mass[b, a]
            y[a, c] = torque[a, c] * (1.0 - held[a, c])
            y[a, 3 + c] = force[a, c] * (1.0 - held[a, 3 + c])
    _add_mass_coupling(D, W, coupling, held, b)
    for a in range(n):  # factor: L_a, W_a = L_a⁻¹ E_a
        if a > 0:
            for r in range(6):
                for c in range(r + 1):
                    t = 0.0
                    for k in range(6):
                        t += W[a - 1, k, r] * W[a - 1, k, c]
                    D[a, r, c] -= t
        if not (D[a, 0, 0] > 0.0):
            return False
        _chol6(D[a])
        for j in range(6):
            if not (D[a, j, j] > 0.0):
                return False
        if a < n - 1:
            for c in range(6):
                _lower_solve(D[a], W[a, :, c])
    return True


@njit(cache=True, error_model="numpy")
def substitute(D, W, y, first):
    """Solve with the factor L of :func:`factor_assembled` in place: ``y`` (n, 6) becomes ``(M + β h² K + …)⁻¹ y``
    = ``L⁻ᵀ L⁻¹ y``.

    Args:
        D: The factor's diagonal blocks, shape (n, 6, 6).
        W: Its off-diagonal blocks, shape (n, 6, 6).
        y: The right-hand side, shape (n, 6), solved in place.
        first: y is zero on the nodes before it (the forward sweep starts there).
    """
    forward(D, W, y, first)
    backward(D, W, y)


@njit(cache=True, error_model="numpy")
def forward(D, W, y, first):
    """``y ← L⁻¹ y`` in place (:func:`substitute`'s first sweep).

    Args:
        D: The factor's diagonal blocks, shape (n, 6, 6).
        W: Its off-diagonal blocks, shape (n, 6, 6).
        y: Shape (n, 6).
        first: The first node where y is not zero.
    """
    n = y.shape[0]
    for a in range(first, n):  # L_a y_a = F_a − W_{a−1}ᵀ y_{a−1}
        if a > first:
            for r in range(6):
                t = 0.0
                for k in range(6):
                    t += W[a - 1, k, r] * y[a - 1, k]
                y[a, r] -= t
        _lower_solve(D[a], y[a])


@njit(cache=True, error_model="numpy")
def forward_columns(D, W, Y, first):
    """``Y ← L⁻¹ Y`` in place for m right-hand sides at once (:func:`forward`, the columns innermost).

    Args:
        D: The factor's diagonal blocks, shape (n, 6, 6).
        W: Its off-diagonal blocks, shape (n, 6, 6).
        Y: Shape (n, 6, m).
        first: The first node where Y is not zero.
    """
    n, m = Y.shape[0], Y.shape[2]
    for a in range(first, n):
        if a > first:
            for r in range(6):
                for k in range(6):
                    w = W[a - 1, k, r]
                    for c in range(m):
                        Y[a, r, c] -= w * Y[a - 1, k, c]
        for i in range(6):
            for k in range(i):
                w = D[a, i, k]
                for c in range(m):
                    Y[a, i, c] -= w * Y[a, k, c]
            inv = 1.0 / D[a, i, i]
            for c in range(m):
                Y[a, i, c] *= inv


@njit(cache=True, error_model="numpy")
def backward(D, W, y):
    """``y ← L⁻ᵀ y`` in place (:func:`substitute`'s second sweep).

    Args:
        D: The factor's diagonal blocks, shape (n, 6, 6).
        W: Its off-diagonal blocks, shape (n, 6, 6).
        y: Shape (n, 6).
    """
    n = y.shape[0]
    for a in range(n - 1, -1, -1):  # L_aᵀ x_a = y_a − W_a x_{a+1}
        if a < n - 1:
            for r in range(6):
                t = 0.0
                for k in range(6):
                    t += W[a, r, k] * y[a + 1, k]
                y[a, r] -= t
        _upper_solve(D[a], y[a])


@njit(cache=True, error_model="numpy")
def write_filtered(mass, inertia, held, b, force, torque, y):
    """The filtered forces of the free directions from the solution y: ``τ̃ = J y_η``, ``f̃ = m y_p``.

    Args:
        mass: Node masses [kg], shape (B, n).
        inertia: Principal node inertias [kg·m²], shape (B, n, 3).
        held: 1 for a held direction, else 0, shape (n, 6).
        b: Rod index in the batch.
        force: World node forces [N] of rod b, shape (n, 3), written in the free directions.
        torque: Body node torques [N·m] of rod b, shape (n, 3), likewise.
        y: The solution, shape (n, 6).
    """
    n = y.shape[0]
    for a in range(n):
        for c in range(3):
            if held[a, c] == 0.0:
                torque[a, c] = inertia[b, a, c] * y[a, c]
            if held[a, 3 + c] == 0.0:
                force[a, c] = mass[b, a] * y[a, 3 + c]
