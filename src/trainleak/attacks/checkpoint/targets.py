"""Stationarity targets: which subgradient the released weights should equal.

Steepest descent with respect to a norm N drives a homogeneous network towards a KKT point of
min N(theta) s.t. y_i Phi(theta; x_i) >= 1 (Tsilivis, Gronich, Kempe & Vardi, ICLR 2025,
arXiv 2410.22069), whose stationarity condition reads

    g(theta; X, lambda) = sum_i lambda_i y_i grad Phi(theta; x_i)  in  c * dN(theta).

Which norm depends on the optimizer (Gronich & Vardi, arXiv 2602.16340): GD/SGD/momentum give
l2 (Lyu & Li 2020), Muon gives the per-layer spectral norm (network norm = max over layers),
Adam with epsilon -> 0 and Signum give l-infinity. Each target below turns one of these
conditions into a normalised residual that the KKT attack minimises over candidates and
multipliers. Vectors (biases) are not orthogonalised by Muon: for them the spectral target
falls back to the l2 direction (a documented choice).

How the spectral and l-infinity targets are turned into losses is this project's design
[inferred from the abstract of seed 1 and the norms' subdifferentials].
"""

from __future__ import annotations

from typing import Literal, Protocol

import torch

TargetName = Literal["l2", "spectral", "spectral_psd", "linf"]
TARGETS: tuple[str, ...] = ("l2", "spectral", "spectral_psd", "linf")


class StationarityTarget(Protocol):
    """A residual r(g) >= 0 that vanishes when g lies in c * dN(theta)."""

    name: str

    def parameters(self) -> list[torch.Tensor]:
        """Learnable parameters of the target (layer weights mu, PSD factors)."""
        ...

    def residual(self, g: list[torch.Tensor]) -> torch.Tensor:
        """Normalised residual of the combination ``g`` (same layout as theta)."""
        ...


def _sq(ts: list[torch.Tensor]) -> float:
    return sum(float((t.detach() ** 2).sum()) for t in ts)


class L2Target:
    """theta = g (the combination absorbs c): residual ||theta - g||^2 / ||theta||^2."""

    name = "l2"

    def __init__(self, theta: list[torch.Tensor]) -> None:
        self.theta = [t.detach() for t in theta]
        self.norm_sq = _sq(self.theta)

    def parameters(self) -> list[torch.Tensor]:
        return []

    def residual(self, g: list[torch.Tensor]) -> torch.Tensor:
        return sum(((p - q) ** 2).sum() for p, q in zip(self.theta, g)) / self.norm_sq  # type: ignore[return-value]


def spectral_direction(w: torch.Tensor) -> torch.Tensor:
    """Polar factor U V^T of a matrix (the steepest spectral-norm direction)."""
    u, _, vh = torch.linalg.svd(w.double(), full_matrices=False)
    return (u @ vh).to(w.dtype)


class SpectralTarget:
    """Muon: g_l = c * mu_l * U_l M_l V_l^T with mu on the simplex, M_l PSD with trace 1.

    ``psd=False`` uses M_l = I / k on all singular directions (T_l = mu_l *
    spectral_direction(W_l), up to scale); ``psd=True`` learns M_l = L L^T / tr(L L^T) on the
    top singular subspace (the singular values within ``tol`` of the largest). The overall
    scale c is fixed so that the target has the norm of theta, which rules out the trivial
    solution g = 0.
    """

    def __init__(self, theta: list[torch.Tensor], *, psd: bool = False, tol: float = 0.1) -> None:
        self.name = "spectral_psd" if psd else "spectral"
        self.theta = [t.detach() for t in theta]
        self.norm = _sq(self.theta) ** 0.5
        self.psd = psd
        self.bases: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        self.factors: list[torch.Tensor] = []
        for t in self.theta:
            if t.ndim != 2:
                self.bases.append(None)
                continue
            u, s, vh = torch.linalg.svd(t.double(), full_matrices=False)
            k = int((s >= (1 - tol) * s[0]).sum()) if psd else s.shape[0]
            self.bases.append((u[:, :k].to(t.dtype), vh[:k].to(t.dtype)))
            if psd:
                self.factors.append(torch.eye(k, dtype=t.dtype, device=t.device).requires_grad_())
        self.mu_logits = torch.zeros(
            len(self.theta), device=self.theta[0].device, requires_grad=True
        )

    def parameters(self) -> list[torch.Tensor]:
        return [self.mu_logits, *self.factors]

    def directions(self) -> list[torch.Tensor]:
        """Per-layer unit-Frobenius directions D_l of the subgradient."""
        out, f = [], 0
        for t, basis in zip(self.theta, self.bases):
            if basis is None:
                d = t
            elif self.psd:
                lf = self.factors[f]
                f += 1
                m = lf @ lf.T
                d = basis[0] @ (m / m.trace()) @ basis[1]
            else:
                d = basis[0] @ basis[1]
            out.append(d / d.norm().clamp_min(1e-30))
        return out

    def residual(self, g: list[torch.Tensor]) -> torch.Tensor:
        mu = torch.softmax(self.mu_logits, 0)
        dirs = self.directions()
        scale = self.norm / torch.sqrt((mu**2).sum())
        res = sum(((q - scale * m * d) ** 2).sum() for q, m, d in zip(g, mu, dirs))
        return res / self.norm**2  # type: ignore[return-value]


class LInfTarget:
    """Adam (epsilon -> 0) and Signum: g in c * conv{sign(theta_j) e_j : |theta_j| = max}.

    Coordinates within ``tol`` (relative) of ||theta||_inf form the set J. Off J the condition
    is the equality g_j = 0; on J only the sign inequality sign(theta_j) g_j >= 0 remains; the
    scale is fixed by <g, theta> = ||theta||_2^2 (the value the l2 target would give).
    """

    name = "linf"

    def __init__(self, theta: list[torch.Tensor], *, tol: float = 0.01) -> None:
        self.theta = [t.detach() for t in theta]
        self.norm_sq = _sq(self.theta)
        top = max(float(t.abs().max()) for t in self.theta)
        self.on_set = [t.abs() >= (1 - tol) * top for t in self.theta]
        self.signs = [t.sign() for t in self.theta]

    def parameters(self) -> list[torch.Tensor]:
        return []

    def saturation(self) -> float:
        """Fraction of coordinates in J."""
        return sum(int(m.sum()) for m in self.on_set) / sum(m.numel() for m in self.on_set)

    def residual(self, g: list[torch.Tensor]) -> torch.Tensor:
        off = sum((q[~j] ** 2).sum() for q, j in zip(g, self.on_set))
        wrong_sign = sum(
            (torch.relu(-(s * q)[j]) ** 2).sum() for q, s, j in zip(g, self.signs, self.on_set)
        )
        inner = sum((q * t).sum() for q, t in zip(g, self.theta))
        scale = (inner / self.norm_sq - 1.0) ** 2
        return (off + wrong_sign) / self.norm_sq + scale  # type: ignore[return-value]


def make_target(name: str, theta: list[torch.Tensor]) -> StationarityTarget:
    """Build the target called ``name`` for the released parameters ``theta``."""
    if name == "l2":
        return L2Target(theta)
    if name in ("spectral", "spectral_psd"):
        return SpectralTarget(theta, psd=name == "spectral_psd")
    if name == "linf":
        return LInfTarget(theta)
    raise ValueError(f"unknown target {name!r}; expected one of {list(TARGETS)}")


def target_for_optimizer(optimizer: str | None) -> str:
    """The target implied by an optimizer's implicit bias (``l2`` when unknown)."""
    return {"muon": "spectral", "adam": "linf", "signum": "linf"}.get(optimizer or "", "l2")
