"""The informed adversary against private ridge regression (output perturbation).

Knowing the other records, the adversary forms A_- = X_-^T X_- + lam I and b_- = X_-^T y_-;
the normal equations of the full data give

    v = A_- theta_tilde - b_- = x (y - x^T theta_hat) + A_- xi,   xi ~ N(0, sigma^2 I),

a rank-one signal along the target plus known-covariance noise. The estimate is
x_hat = alpha * sign(y) * v / ||v|| ([inferred]: the residual y - x^T theta_hat has the sign of
y whenever ||theta_hat|| < 1, which the default lam = n guarantees). With shrinkage, alpha is
||x|| times the estimated cosine sqrt(max(0, 1 - E||P A_- xi||^2 / ||P v||^2)) (a Wiener-style
factor; the noise energy is known exactly), so the error never exceeds the trivial guess by
much. Projecting v on a known or PCA-estimated s-dimensional subspace P first moves the
transition from rho ~ d to rho ~ s.

References:
    Balle, Cherubin & Hayes, *Reconstructing Training Data with Informed Adversaries*,
    S&P 2022, arXiv 2201.04845 (the informed adversary; closed-form attacks on linear models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.errors import MissingKnowledgeError
from trainleak.progress import Progress
from trainleak.releases.dp import PrivateRegression
from trainleak.releases.knowledge import Knowledge
from trainleak.validation import param

Subspace = Literal["none", "known", "pca"]


def _basis(knowledge: Knowledge, x_o: torch.Tensor, mode: str, rank: int) -> torch.Tensor | None:
    if mode == "none":
        return None
    if mode == "known":
        basis = knowledge.subspace_basis
        if basis is None:
            raise MissingKnowledgeError("subspace='known' needs Knowledge(subspace_basis=U)")
        return torch.as_tensor(basis, dtype=torch.float64)
    _, _, vh = torch.linalg.svd(x_o, full_matrices=False)
    return vh[:rank].T


@register_attack
@dataclass(frozen=True, kw_only=True)
class InformedRidgeAttack(Attack[PrivateRegression]):
    """Reconstruct the target of a private ridge regression from the other records.

    Args:
        subspace: ``none``, ``known`` (``Knowledge.subspace_basis``, a (d, s)
            orthonormal matrix) or ``pca`` (top ``rank`` right singular vectors of X_-).
        rank: subspace dimension for ``pca``.
        shrinkage: scale by the estimated cosine (Wiener-style) instead of the full norm.
    """

    name: ClassVar[str] = "informed-ridge"
    summary: ClassVar[str] = (
        "informed-adversary reconstruction of a record from rho-zCDP ridge regression"
    )
    release_type: ClassVar[type[PrivateRegression]] = PrivateRegression
    requires: ClassVar[frozenset[str]] = frozenset({"input_shape", "other_records", "labels"})

    subspace: Subspace = param("none", choices=Subspace)
    rank: int = param(8, ge=1)
    shrinkage: bool = True

    def run(
        self,
        release: PrivateRegression,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        if knowledge.other_records is None or knowledge.labels is None:
            raise MissingKnowledgeError("this attack needs Knowledge fields: other_records, labels")
        x_o, y_o = (t.double() for t in knowledge.other_records)
        d = x_o.shape[1]
        a = x_o.T @ x_o + release.lam * torch.eye(d, dtype=torch.float64)
        v = a @ release.theta.double() - x_o.T @ y_o
        basis = _basis(knowledge, x_o, self.subspace, self.rank)
        noise_cov = release.sigma**2 * (a @ a)
        if basis is not None:
            v = basis @ (basis.T @ v)
            noise_energy = float(torch.trace(basis.T @ noise_cov @ basis))
        else:
            noise_energy = float(torch.trace(noise_cov))
        energy = float(v @ v)
        cos2 = max(0.0, 1.0 - noise_energy / energy) if energy > 0 else 0.0
        norm = 1.0 if knowledge.record_norm is None else float(knowledge.record_norm)
        alpha = norm * (cos2**0.5 if self.shrinkage else 1.0)
        sign = 1.0 if float(knowledge.labels.reshape(-1)[0]) >= 0 else -1.0
        x_hat = sign * alpha * v / max(energy**0.5, 1e-300)
        return Reconstruction(
            inputs=x_hat.reshape(1, d).float(),
            scores=torch.tensor([cos2**0.5], dtype=torch.float32),
            diagnostics={"estimated_cosine": cos2**0.5, "signal_energy": energy},
        )
