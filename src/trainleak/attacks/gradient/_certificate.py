"""A local-uniqueness certificate for a batch decoded from one FedSGD gradient.

**Statement.** Assume the released first-layer gradient ``U`` (after the decoder's row
transform) is the mean of ``B`` per-sample gradients of the released model, up to a rounding
error bounded row by row by :func:`rounding_bound`. For a decoded batch of ``B`` samples
``x_k`` with labels ``y_k`` the certificate returns, for every sample, an error bound ``e_k <=
tol`` and a radius ``rho_k > e_k`` such that *every* batch ``(x'_k, y'_k)`` of ``B`` samples
that reproduces ``U`` within that rounding and has ``||x'_k - x_k||_2 <= rho_k`` for all ``k``
satisfies ``||x'_k - x_k||_2 <= e_k`` and ``y'_k = y_k`` for all ``k``. Since ``||.||_inf <=
||.||_2`` the bound holds coordinate by coordinate. It is all or nothing: either the whole
batch is certified or no sample is. Nothing is claimed about batches farther than ``rho_k``:
the batch-to-update map is not injective in general (two samples of one label whose difference
leaves the logits unchanged and crosses no ReLU give exactly the update of their mean, twice),
so duplicate and near-duplicate samples are never certified.

**Proof, pivot chain.** On the ball every ReLU keeps its state, so sample ``i``'s coefficient
in row ``r`` is ``c_ir(x)`` with the Lipschitz constants of :mod:`._linearisation`. The samples
are ordered so that sample ``k`` has a *pivot* row in which every other sample not yet ordered
has a zero (or bounded, tiny) coefficient. Row ``r`` then reads ``c_k(x'_k) (x'_k, 1) =
c_k(x_k) (x_k, 1) + E`` with ``E`` bounded by the row's residual, the rounding bound, the
ordered samples' proven moves and the others' bounded contributions; so ``c_k(x'_k) (x'_k -
x_k) = E_w - x_k E_b`` and ``||x'_k - x_k|| <= ||E_w - x_k E_b|| / (|c_k(x_k)| - |E_b|)``. A
label ``y' != y_k`` shifts ``c_k`` by the constant ``q_{y_k} - q_{y'}``; it is excluded when
that exceeds ``|E_b|`` plus the coefficient's move. Samples no pivot isolates form a *core*,
bounded by a Kantorovich argument on the core's Jacobian (:mod:`._certificate_core`).
Finally every row's residual must be one the proven bounds allow, else the true batch is not
in the ball and nothing is certified.

References:
    Kantorovich, Akilov, *Functional Analysis*, 1982 (local uniqueness from a well-conditioned
    linearisation). Luby et al., *Efficient Erasure Correcting Codes*, IEEE Trans. Inf.
    Theory 47(2), 2001 (peeling orders). Higham, *Accuracy and Stability of Numerical
    Algorithms*, SIAM 2002, Sec. 3.1 (rounding of sums).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from trainleak.attacks.gradient._linearisation import Linearisation


@dataclass(frozen=True)
class CertificateSettings:
    """Tolerances of the certificate.

    Attributes:
        tol: the input tolerance (l2 per sample, hence also max-abs) a certified sample meets.
        unit_roundoff: ``u`` of the update's dtype.
        rounding: the assumed rounding error of the update, in units of ``u`` times each
            row's absolute scale (:func:`rounding_bound`).
        residual_rtol: largest relative residual of the whole update (all layers) a batch
            certificate accepts (a consistency check, not part of the proof).
        max_core: largest reduced Gram matrix the core bound assembles.
        max_span: largest mixing Gram matrix (``n^2`` for a core of ``n``) the span
            reduction assembles when the core is too large for the direct bound.
    """

    tol: float
    unit_roundoff: float
    residual_rtol: float
    rounding: float = 16.0
    max_core: int = 3000
    max_span: int = 4096


@dataclass
class Certificate:
    """The certificate of one decoded batch (see the module docstring for its statement).

    Attributes:
        certified: per sample, whether it is certified.
        error_bound: proven l2 error bound per sample (inf when none).
        radius: radius of the neighbourhood the bound covers (0 when none).
        batch: whether the whole batch is certified.
        reason: why the batch (or some sample) is not certified; empty when it is.
    """

    certified: torch.Tensor
    error_bound: torch.Tensor
    radius: torch.Tensor
    batch: bool = False
    reason: str = ""
    details: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def refuse(n: int, reason: str) -> Certificate:
        """Nothing certified, for ``reason``."""
        return Certificate(
            certified=torch.zeros(n, dtype=torch.bool),
            error_bound=torch.full((n,), math.inf, dtype=torch.float64),
            radius=torch.zeros(n, dtype=torch.float64),
            reason=reason,
        )


@dataclass
class Chain:
    """Result of one pivot-chain pass.

    ``dev_c[i, r]`` bounds ``|c_ir(x'_i) - c_ir(x_i)|`` and ``dev_v[i, r]`` bounds
    ``|c_ir(x'_i)| ||x'_i - x_i||`` for the samples on the chain (zero off it), so that sample
    ``i`` moves row ``r`` by at most ``dev_c ||(x_i, 1)|| + dev_v``.
    """

    order: list[int]
    error: torch.Tensor  # (n,) inf for samples off the chain
    label_ok: torch.Tensor  # (n,)
    dev_c: torch.Tensor  # (n, m')
    dev_v: torch.Tensor  # (n, m')

    def row_allowance(self, xt_norm: torch.Tensor) -> torch.Tensor:
        """Per-row bound of how far the chain samples can move each row ``(m',)``."""
        return (self.dev_c * xt_norm.unsqueeze(1) + self.dev_v).sum(0)


def rounding_bound(
    lin: Linearisation, measured: torch.Tensor, kappa: float, u: float
) -> torch.Tensor:
    """Per-row bound of the update's rounding error, in per-sample units ``(m', 2)``: column 0
    for the weight part of the row (l2), column 1 for its bias entry.

    The certificate *assumes* that every transformed first-layer row of the update is within
    ``kappa u`` times its absolute scale of the exact mean gradient. The scale of the bias entry
    is the sum over decoded samples of the absolute-value backprop product plus the
    coefficient's sensitivity to a rounding of the input (gradient norm times input norm), plus
    the measured entry; the weight part's scale weights each sample by its input norm. Higham's
    worst case for sums of ``n`` terms (*Accuracy and Stability of Numerical Algorithms*, 2002,
    Sec. 3.1) gives ``kappa`` of order ``B + width``; float32 clients of this library measure
    ``kappa`` below 0.6 (see ``docs/certificates.md``).
    """
    c = lin.coefficients().abs()
    absolute = lin.absolute
    xn = lin.x.norm(dim=1)
    sens = lin.lipschitz(kappa * u * xn) * xn.unsqueeze(1)
    scale = c + absolute + sens
    w = (scale * xn.unsqueeze(1)).sum(0) + measured[:, :-1].norm(dim=1)
    b = scale.sum(0) + measured[:, -1].abs()
    return kappa * u * torch.stack([w, b], dim=1)


def own_rounding(lin: Linearisation, measured: torch.Tensor) -> torch.Tensor:
    """Per-row bound of the rounding of the certificate's own float64 residual ``(m', 2)``.

    Row ``r`` of the residual is ``R_r - sum_i c_ir (x_i, 1)``: a sum whose terms with ``c_ir
    = 0`` are exact, so Higham's ``gamma_k`` applies with ``k`` the row's members plus the
    ``C`` terms of each coefficient and a few operations: ``gamma_k sum_i (|c_ir| +
    |q_ir|.|p_i - e_y|) (||x_i||, 1) + u (||R_r,w||, |R_r,b|)``.
    """
    u = float(torch.finfo(torch.float64).eps) / 2
    members = (lin.q_norm > 0).sum(0).to(torch.float64)  # (m',)
    k = members + lin.probs.shape[1] + 4
    gamma = (k * u / (1 - k * u)).unsqueeze(1)
    scale = lin.coefficients().abs() + lin.absolute
    w = (scale * lin.x.norm(dim=1).unsqueeze(1)).sum(0)
    parts = torch.stack([w, scale.sum(0)], dim=1)
    meas = torch.stack([measured[:, :-1].norm(dim=1), measured[:, -1].abs()], dim=1)
    return gamma * parts + u * meas


def _others(sup: torch.Tensor, free: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``sum_{i free, i != k} sup[i, r]`` for every candidate ``k`` in ``idx``, rounded up.

    Summed directly (never as a total minus ``k``'s term, whose cancellation could hide the
    other samples' share behind ``k``'s own rounding): the largest free term of a row is left
    out for the candidate that holds it, every free term for the others.
    """
    live = sup * free.unsqueeze(1).to(sup.dtype)
    top = live.argmax(0)  # (m',)
    rest = live.clone()
    rest[top, torch.arange(live.shape[1])] = 0.0
    grow = 1 + 2 * int(free.sum()) * torch.finfo(sup.dtype).eps
    total, without_top = live.sum(0) * grow, rest.sum(0) * grow
    return torch.where(top.unsqueeze(0) == idx.unsqueeze(1), without_top, total)
