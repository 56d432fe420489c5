"""Root bending moments of a two-link flexible arm from the IMU-measured link loads (seed 000, §V, eq. (45)).

The control law of seed 000, eq. (45) needs the root bending moment ``E_iI_i w_i″(0)`` of each link. From
a few mode shapes the reconstructed base curvature ``Φ″(0)·η`` is poor (the static sag of a link carrying a
tip load is not a mode shape, and curvature is the second derivative of a truncated series: in our runs
16 % / 55 % off on links 1 / 2). Beam equilibrium gives the same moment without derivatives: the bending
moment at a link's root equals the moment of the loads carried by the link, and an accelerometer measures
exactly the load per unit mass, the specific force ``f = p̈ − g``. For link i with base frame (a along
the undeformed link, n normal), points ``(ξ, w(ξ))``, distributed mass ρA and tip mass M:

    Λ_i = ∫₀ᴸ ρA (ξ f_n − w f_a) dξ + M (L f_n(L) − w(L) f_a(L))        [N m]   (= −E_iI_i w_i″(0))

with ``f_a, f_n`` fitted affinely in ξ to the IMUs' specific forces, each rotated from its tilted local frame
into the link's base frame by its local slope ``δ_s = ψ̂_s − φ_i`` (filtered inclination minus base
angle); ``w(ξ) = Φ(ξ)η̂`` from the modal reconstruction (this term is the seed's deformation–gravity
coupling M g w(L) sin θ, with the inertial part included). The affine fit is exact for the rigid motion and
gravity; it misses only the non-affine part of the elastic accelerations (≈ 5 N m RMS on a 3100 N m moment
in our closed-loop runs, against ≈ 500 N m for Φ″(0)η).

Joint 1 carries link 2 as well: the hub-1 load is ``Λ₁ + (L₁, w₁(L₁)) × F₂ + τ₂``, with ``F₂`` the mass-
weighted specific force of link 2 and its payload (rotated into link 1's base frame by θ₂ + w₁′(L₁)) and
``τ₂`` the joint-2 torque (the reaction of the joint-2 actuator on link 1's tip; the last command). The
hub equations are then ``I_h1 φ̈₁ = τ₁ − hub-1 load`` and ``I_h2 φ̈₂ = τ₂ − Λ₂`` exactly for the planar
arm with point payloads (rotary inertia of the payloads neglected; it is zero in our simulator).

Everything is linear in the specific forces (and in η for the coupling term), so :class:`LinkLoadModel`
holds a few precomputed matrices; one evaluation is ~10 TorchScript ops.
"""

import math
from typing import Sequence, Tuple

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.config import check
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.physics.modal.reconstruction import ModalReconstructor

__all__ = ["LinkLoadModel"]


class LinkLoadModel(nn.Module):
    """Load moments of a planar serial flexible arm from link-frame IMU specific forces (module docstring).

    ``forward(f_link (2, S) [f_y; f_z] m/s², delta (S,) local slopes rad, eta (M,))`` →
    ``(moments (n,) Λ_i [N m], forces (2, n) [F_a; F_n] [N] in each link's base frame)``.
    IMUs ordered link by link (as :class:`~flexlearn.physics.modal.FlexibleArmEstimator`).
    """

    # buffers (real annotations: this module does not postpone them, TorchScript reads them)
    mom_n: Tensor
    force: Tensor
    coup: Tensor
    link_sum: Tensor
    cols: Tensor

    def __init__(self, mom_n: Tensor, force: Tensor, coup: Tensor, link_sum: Tensor) -> None:
        super().__init__()
        self.register_buffer("mom_n", mom_n)  # (n, S): Σ m ξ f_n from the affine fit
        self.register_buffer("force", force)  # (n, S): Σ m f from the affine fit (applies to f_a and f_n)
        self.register_buffer("coup", coup)  # (S, M): per IMU, weights of η in Σ m w f_a
        self.register_buffer("link_sum", link_sum)  # (n, S): 1 where IMU s is on link i
        self.register_buffer("cols", torch.cat([mom_n, force, link_sum], 0).t().contiguous())  # (S, 3n)

    @classmethod
    def build(
        cls,
        links: Sequence[FlexibleLink],
        rho_A: Sequence[float],
        tip_mass: Sequence[float],
        imu_positions: Sequence[Sequence[float]],
        n_modes: Sequence[int],
        quad: int = 40,
    ) -> "LinkLoadModel":
        """From the controller's modal links, loads, IMU positions and modes.

        Args:
            links: the controller's modal links.
            rho_A: mass per length of each link [kg/m].
            tip_mass: tip masses [kg] (what sits at each link's tip besides the next link).
            imu_positions: IMU positions per link [m] (≥ 2 distinct per link).
            n_modes: modes per link.
            quad: quadrature points per link.

        Returns:
            The load model.

        Raises:
            ConfigError: unless there is one entry per link in each sequence.
        """
        n = len(links)
        check(
            n == len(rho_A) == len(tip_mass) == len(imu_positions) == len(n_modes),
            "load_model.links",
            (n, len(rho_A), len(tip_mass), len(imu_positions), len(n_modes)),
            "one entry per link",
        )
        S = sum(len(p) for p in imu_positions)
        M = sum(n_modes)
        f64 = torch.float64
        mom_n = torch.zeros(n, S, dtype=f64)
        force = torch.zeros(n, S, dtype=f64)
        coup = torch.zeros(S, M, dtype=f64)
        link_sum = torch.zeros(n, S, dtype=f64)
        gx, gw = np.polynomial.legendre.leggauss(quad)
        s0 = m0 = 0
        for i, (lk, pos, m) in enumerate(zip(links, imu_positions, n_modes)):
            xs = [float(v) for v in pos]
            check(len(set(xs)) >= 2, f"load_model.imu_positions[{i}]", xs, "need two distinct IMU positions")
            L = float(lk.length)
            k = len(xs)
            xi = torch.as_tensor((gx + 1.0) / 2.0 * L, dtype=f64)
            wq = torch.as_tensor(gw / 2.0 * L * rho_A[i], dtype=f64)  # mass per node [kg]
            Mt = float(tip_mass[i])
            mass = float(wq.sum()) + Mt
            s1 = float((wq * xi).sum()) + Mt * L
            s2 = float((wq * xi * xi).sum()) + Mt * L * L
            d = lk.modal_data(m)
            phq = lk.mode_shapes(xi, m, 0, d).reshape(-1, m)
            tip = lk.tip_values(m, d)["tip"].reshape(m)
            m_phi = wq @ phq + Mt * tip  # ∫ρA Φ + M Φ(L)
            mx_phi = (wq * xi) @ phq + Mt * L * tip  # ∫ρA ξ Φ + M L Φ(L)
            A = torch.stack([torch.ones(k, dtype=f64), torch.tensor(xs, dtype=f64)], 1)
            P = torch.linalg.pinv(A)  # (2, k): affine coefficients (c₀, c₁) of f(ξ) = c₀ + c₁ ξ
            mom_n[i, s0 : s0 + k] = s1 * P[0] + s2 * P[1]
            force[i, s0 : s0 + k] = mass * P[0] + s1 * P[1]
            coup[s0 : s0 + k, m0 : m0 + m] = P[0].unsqueeze(1) * m_phi + P[1].unsqueeze(1) * mx_phi
            link_sum[i, s0 : s0 + k] = 1.0
            s0 += k
            m0 += m
        return cls(mom_n, force, coup, link_sum)

    def forward(self, f_link: Tensor, delta: Tensor, eta: Tensor) -> Tuple[Tensor, Tensor]:
        """Load moments and forces from the link-frame specific forces (see the class docstring).

        Args:
            f_link: [f_y; f_z] (2, S) [m/s²].
            delta: local slopes (S,) [rad].
            eta: modal coordinates (M,).

        Returns:
            ``(moments (n,) Λ_i [N m], forces (2, n) [F_a; F_n] [N] in each link's base frame)``.
        """
        c, s = torch.cos(delta), torch.sin(delta)
        fa = c * f_link[0] - s * f_link[1]  # along the undeformed link
        fn = s * f_link[0] + c * f_link[1]  # normal to it
        mom = torch.mv(self.mom_n, fn) - torch.mv(self.link_sum, fa * torch.mv(self.coup, eta))
        forces = torch.mm(torch.stack([fa, fn]), self.force.t())  # (2, n)
        return mom, forces

    @torch.jit.export
    def packed(self, f_link: Tensor, trig: Tensor, eta: Tensor) -> Tensor:
        """Same as :meth:`forward` in a few ops (the hot path), from ``trig``.

        ``trig`` (2, 2, S) = [[sin δ, cos δ], [cos δ, −sin δ]] (one ``sin`` of [δ, δ + π/2, δ + π/2, −δ]):
        ``Y = [f_n; f_a; f_a ⊙ (coup η)] @ cols`` (3, 3n) with ``cols = [mom_n | force | link_sum]ᵀ``:
        Λ = Y[0, :n] − Y[2, 2n:], F_n = Y[0, n:2n], F_a = Y[1, n:2n].

        Args:
            f_link: [f_y; f_z] (2, S) [m/s²].
            trig: (2, 2, S), see above.
            eta: modal coordinates (M,).

        Returns:
            Y (3, 3n).
        """
        fr = (trig * f_link.unsqueeze(0)).sum(1)  # [f_n; f_a] (2, S)
        return torch.mm(torch.cat([fr, (fr[1] * torch.mv(self.coup, eta)).unsqueeze(0)]), self.cols)

    @staticmethod
    def trig_of_slopes(delta_map: Tensor) -> Tuple[Tensor, Tensor]:
        """(offset (4S,), map (4S, S)) such that ``sin(offset + map ψ̂)`` viewed (2, 2, S) is the ``trig``
        argument of :meth:`packed` for local slopes ``δ = delta_map ψ̂``.

        Args:
            delta_map: the map (S, S) from the filtered inclinations ψ̂ (S,) to the local slopes δ (S,).

        Returns:
            ``(offset (4S,), map (4S, S))``: the phase offsets [0, π/2, π/2, 0] (one block of S each) and the
            stacked maps [delta_map; delta_map; delta_map; −delta_map].
        """
        S = delta_map.shape[0]
        half_pi = torch.full((S,), math.pi / 2, dtype=delta_map.dtype)
        zero = torch.zeros(S, dtype=delta_map.dtype)
        return (torch.cat([zero, half_pi, half_pi, zero]), torch.cat([delta_map, delta_map, delta_map, -delta_map]))


def _static_slope(lk: FlexibleLink, rho_A: float, tip_mass: float, x: float, quad: int = 40) -> list[float]:
    """Slope w′(x) [rad] of a clamped Euler–Bernoulli link under gravity, per unit of its three loads:
    [g cos φ (own weight and tip mass, per m/s²), normal tip force F [N], tip moment T [N m]]:
    ``w′(x) = −(1/EI)∫₀ˣ M(s) ds``, ``M(s) = g cos φ (ρA (L − s)²/2 + M_t (L − s)) + F (L − s) + T``."""
    L = float(lk.length)
    gx, gw = np.polynomial.legendre.leggauss(quad)
    s = (gx + 1.0) / 2.0 * x
    w = gw / 2.0 * x
    u = L - s
    EI = float(lk.EI)
    return [-float((w * (rho_A * u * u / 2.0 + tip_mass * u)).sum()) / EI, -float((w * u).sum()) / EI, -x / EI]


def static_angle_correction(
    links: Sequence[FlexibleLink],
    rho_A: Sequence[float],
    tip_mass: Sequence[float],
    imu_positions: Sequence[Sequence[float]],
    n_modes: Sequence[int],
    gravity: float,
) -> Tensor:
    """C (2, 2): joint-angle correction ``Δθ = C (cos φ₁, cos φ₂)`` [rad] for a two-link arm at rest.

    The estimator subtracts modal slopes from the IMU inclinations (θ₁ = ψ_r1 − w₁′(l_r1), θ₂ also with
    w₁′(L₁) and w₂′(l_r2)); the static sag of a link carrying a tip load is not a mode shape, so a few-mode
    fit of the sag (exact slopes at the IMUs in, ``η = G (w′(ξ_s) − w′(l_r))``) returns slightly wrong slopes
    at l_r and L (0.2–0.5° of angle in our arm). Δθ is that error for the exact static sag under gravity
    (link 1 loaded by link 2's weight and gravity moment at its tip), linear in the cosines of the absolute
    base angles φ. Adding it to the estimated angles removes the static bias; dynamic parts are left.

    Args:
        links: the controller's two modal links.
        rho_A: mass per length of each link [kg/m].
        tip_mass: tip mass of each link [kg] (besides the next link).
        imu_positions: IMU positions per link [m], reference IMU first.
        n_modes: modes per link.
        gravity: gravitational acceleration [m/s²].

    Returns:
        C (2, 2) [rad].

    Raises:
        ConfigError: unless there are two links.
    """
    check(len(links) == 2, "static_angle_correction.links", len(links), "two links")
    g = float(gravity)
    m2 = float(rho_A[1]) * float(links[1].length) + float(tip_mass[1])  # weight carried at link 1's tip
    s2 = float(rho_A[1]) * float(links[1].length) ** 2 / 2.0 + float(tip_mass[1]) * float(links[1].length)
    err = []  # per link: modal − exact slope at [l_r, L], columns (cos φ₁, cos φ₂)
    for i in range(2):
        lk, pos, m = links[i], [float(v) for v in imu_positions[i]], int(n_modes[i])
        L = float(lk.length)

        def exact(x: float, lk: FlexibleLink = lk, i: int = i) -> list[float]:
            """Exact static slopes at x of link i under gravity, columns (cos φ₁, cos φ₂).

            Args:
                x: position along the link [m].
                lk: the link.
                i: link index.

            Returns:
                The two slope coefficients [rad].
            """
            a = _static_slope(lk, float(rho_A[i]), float(tip_mass[i]), x)
            if i == 0:  # own weight, link 2's weight (normal in link 1's frame: cos φ₁) and moment (cos φ₂)
                return [g * a[0] + m2 * g * a[1], s2 * g * a[2]]
            return [0.0, g * a[0]]

        rec = ModalReconstructor.from_link(lk, pos[1:], m, reference=pos[0])
        ref = torch.tensor(exact(pos[0]), dtype=torch.float64)
        rel = torch.stack([torch.tensor(exact(x), dtype=torch.float64) - ref for x in pos[1:]])  # (k − 1, 2)
        eta = rec.gain.to(torch.float64) @ rel  # (m, 2)
        rows = []
        for x in (pos[0], L):
            phi1 = lk.mode_shapes(torch.tensor([x], dtype=torch.float64), m, 1).reshape(m)
            rows.append(phi1 @ eta - torch.tensor(exact(x), dtype=torch.float64))
        err.append(rows)
    d_r1, d_t1, d_r2 = err[0][0], err[0][1], err[1][0]
    return torch.stack([d_r1, d_r2 - d_r1 + d_t1])
