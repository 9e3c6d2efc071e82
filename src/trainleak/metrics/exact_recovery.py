"""Scoring exact batch recovery against the ground truth (never used inside an attack).

A true sample counts as *exactly recovered* when some candidate is within ``atol`` of it in
every coordinate (max absolute error on the [0, 1] scale; 1e-6 by default). A certificate is
*false* when a certified candidate is not within ``atol`` of any true sample, or carries a
label that is not that sample's label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import torch
from scipy.optimize import linear_sum_assignment


class Candidates(Protocol):
    """What scoring needs from a reconstruction: candidate inputs, labels and certificates."""

    @property
    def inputs(self) -> torch.Tensor: ...

    @property
    def labels(self) -> torch.Tensor | None: ...

    @property
    def certified(self) -> torch.Tensor | None: ...

    @property
    def diagnostics(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ExactRecoveryScores:
    """Exact-recovery figures of one reconstruction.

    Attributes:
        batch_size: number of true samples.
        exact_rate: fraction of true samples with a candidate within ``atol``.
        label_accuracy: among samples exactly recovered by a labelled candidate (label >= 0),
            the fraction whose label is right (NaN when there is none).
        certified_fraction: certified candidates divided by the batch size.
        false_certificates: certified candidates that are wrong (input or label).
        mean_psnr: mean over true samples of the best candidate's PSNR (dB, capped at 200).
        max_error: largest best-candidate max-abs error over the batch.
    """

    batch_size: int
    exact_rate: float
    label_accuracy: float
    certified_fraction: float
    false_certificates: int
    mean_psnr: float
    max_error: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _linf(a: torch.Tensor, b: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    rows = [torch.cdist(a[i : i + chunk], b, p=float("inf")) for i in range(0, len(a), chunk)]
    return torch.cat(rows)


def score_exact_recovery(
    x: torch.Tensor, y: torch.Tensor, rec: Candidates, *, atol: float = 1e-6
) -> ExactRecoveryScores:
    """Compare a reconstruction with the true batch ``(x, y)``.

    Args:
        x: true inputs ``(B, ...)``.
        y: true labels ``(B,)``.
        rec: the attack's output.
        atol: max-abs tolerance of an exact recovery.

    Returns:
        The :class:`ExactRecoveryScores`.
    """
    b = int(x.shape[0])
    xt = x.reshape(b, -1).to(torch.float64)
    cand = rec.inputs.reshape(int(rec.inputs.shape[0]), -1).to(torch.float64)
    if int(rec.inputs.shape[0]) == 0:
        return ExactRecoveryScores(b, 0.0, float("nan"), 0.0, 0, 0.0, float("inf"))
    dist = _linf(xt, cand)  # (B, n)
    best, which = dist.min(1)
    exact = best <= atol
    label_acc = float("nan")
    if rec.labels is not None:  # unlabelled candidates (label -1) do not count
        unlabelled = (rec.labels < 0).unsqueeze(0)
        best_l, which_l = dist.masked_fill(unlabelled, float("inf")).min(1)
        hit = best_l <= atol
        if bool(hit.any()):
            label_acc = float((rec.labels[which_l[hit]] == y[hit]).double().mean())
    mse = ((xt - cand[which]) ** 2).mean(1).clamp_min(1e-20)
    psnr = (10 * torch.log10(1.0 / mse)).clamp(max=200.0)
    certified, false_cert = 0, 0
    if rec.certified is not None and bool(rec.certified.any()):
        cert_idx = torch.nonzero(rec.certified).squeeze(1)
        certified = int(cert_idx.numel())
        cd, owner = dist[:, cert_idx].min(0)
        wrong = cd > atol
        if rec.labels is not None:
            wrong |= rec.labels[cert_idx] != y[owner]
        false_cert = int(wrong.sum())
    return ExactRecoveryScores(
        batch_size=b,
        exact_rate=float(exact.double().mean()),
        label_accuracy=label_acc,
        certified_fraction=certified / b,
        false_certificates=false_cert,
        mean_psnr=float(psnr.mean()),
        max_error=float(best.max()),
    )


@dataclass(frozen=True)
class CertificateAudit:
    """Ground-truth audit of an attack's certificates (counts, never used by the attack).

    Certified candidates are assigned to distinct true samples of their label (Hungarian
    matching on the l2 distance); a certificate is *false* when its candidate lies more than
    ``atol`` from its assigned sample in some coordinate or has no sample of its label left.

    Attributes:
        certified: certified candidates.
        false: false certificates among them.
        bound_violations: certified candidates farther (l2) from their sample than the error
            bound the attack stated (``diagnostics["error_bounds"]``), when it states one.
        batch_certified: whether the attack certified the whole batch.
        batch_false: the batch is certified but some sample is not recovered within ``atol``
            by a certified candidate of its label.
    """

    certified: int
    false: int
    bound_violations: int
    batch_certified: bool
    batch_false: bool


def audit_certificates(
    x: torch.Tensor, y: torch.Tensor, rec: Candidates, *, atol: float = 1e-6
) -> CertificateAudit:
    """Audit ``rec``'s certificates against the true batch ``(x, y)``."""

    b = int(x.shape[0])
    batch = bool(rec.diagnostics.get("batch_certified", False))
    if rec.certified is None or not bool(rec.certified.any()):
        return CertificateAudit(0, 0, 0, batch, batch)
    idx = torch.nonzero(rec.certified).squeeze(1)
    cand = rec.inputs.reshape(int(rec.inputs.shape[0]), -1)[idx].to(torch.float64)
    xt = x.reshape(b, -1).to(torch.float64)
    labels = rec.labels[idx] if rec.labels is not None else torch.full_like(idx, -1)
    l2 = torch.cdist(cand, xt)
    cost = l2 + 1e6 * (labels.unsqueeze(1) != y.unsqueeze(0)).to(l2.dtype)
    rows, cols = linear_sum_assignment(cost.numpy())
    rows_t, cols_t = torch.as_tensor(rows), torch.as_tensor(cols)
    err = (cand[rows_t] - xt[cols_t]).abs().amax(1)
    ok = (err <= atol) & (labels[rows_t] == y[cols_t])
    false = int(idx.numel()) - int(ok.sum())
    bounds = rec.diagnostics.get("error_bounds")
    violations = 0
    if bounds is not None:
        bound = torch.tensor(bounds, dtype=torch.float64)[idx][rows_t]
        violations = int((l2[rows_t, cols_t] > bound).sum()) + int(idx.numel()) - len(rows)
    full = len(rows) == b and bool(ok.all())
    return CertificateAudit(int(idx.numel()), false, violations, batch, batch and not full)
