"""KD-UFSL (seed 15): per-record clipping and Gaussian noise, then MDAV microaggregation of
each smashed batch, so that every vector the server receives is shared by at least ``k``
records of the batch.

:func:`mdav` is the maximum distance to average vector algorithm; :func:`centroid_replace`
replaces each record by its group's centroid as a mean, so autograd hands every member
``1/|G|`` of its group's gradient; :class:`KDUFSL` chains the two with the Gaussian mechanism
(on the smashed data, or on the inputs as a switch). :func:`k_anonymity` verifies the
property on what was actually transmitted, exactly (bit-identical rows).

This is a training-time defense: the split-learning simulator applies it inside the client's
forward pass, and an adaptive attacker applies the same public algorithm to its own data.

References:
    Zaland, Mistry and Bhuyan, "Guarding the Middle: Protecting Intermediate Representations
    in Federated Split Learning", arXiv 2602.17614, 2026 (KD-UFSL; [reconstructed] from the
    summary, ``../shared/docs/seed-briefs-2.md`` section 15).
    Domingo-Ferrer and Mateo-Sanz, "Practical data-oriented microaggregation for statistical
    disclosure control", IEEE TKDE 14(1), 2002 (MDAV).
    Domingo-Ferrer and Torra, "Ordinal, continuous and heterogeneous k-anonymity through
    microaggregation", DMKD 11, 2005 (MDAV-generic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from trainleak.errors import ConfigError
from trainleak.releases.split_learning import SmashedDefenseSpec


def _check_k(n: int, k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError.invalid("k", "an integer >= 1", k)
    if k > n:
        raise ConfigError.invalid(
            "k", f"a group size at most the batch size {n} (k-anonymity needs k records)", k
        )


def mdav(x: torch.Tensor, k: int) -> torch.Tensor:
    """MDAV microaggregation: a group id for each row of ``x``, every group of size >= k.

    While at least ``3k`` records remain: ``r`` = the record farthest from the centroid of
    the remaining ones, ``s`` = the record farthest from ``r``; ``r`` and its ``k - 1``
    nearest remaining records form a group, then ``s`` and its ``k - 1`` nearest of those
    still left. With ``2k .. 3k - 1`` left, one group around the record farthest from the
    centroid and the rest as a second group; with fewer, one group (Domingo-Ferrer and
    Mateo-Sanz 2002, section 5; ties go to the lowest index).

    One Gram matrix of the batch (centred first, so that float32 distances keep their
    precision) gives every squared distance up front; the distance of record ``i`` to the
    centroid of the remaining set ``A`` enters only through ``sum_{j in A} d(i, j) =
    |A| ||x_i - c_A||^2 + const``, so it is kept as a row sum and updated by subtracting the
    rows of each new group. Each step is then a few vector operations on precomputed rows:
    cost ``O(n^2 d)`` for the Gram matrix plus ``O(n^2 / k)`` for the selection. The grouping
    carries no gradient (the indices are computed on detached data).

    Args:
        x: ``(n, ...)`` records (flattened internally).
        k: the minimum group size, ``1 <= k <= n``.

    Returns:
        ``(n,)`` int64 group ids ``0 .. G-1`` (on the CPU).

    Raises:
        ConfigError: ``k`` below 1 or larger than the batch.
    """
    n = int(x.shape[0])
    _check_k(n, k)
    if k == 1:
        return torch.arange(n)
    d = _squared_distances(x.detach().reshape(n, -1).cpu())
    taken = _mdav_groups(d, k)
    groups = np.full(n, len(taken), dtype=np.int64)  # the remainder is the last group
    if taken:
        groups[np.concatenate(taken)] = np.arange(len(taken)).repeat(k)
    return torch.from_numpy(groups)


def _squared_distances(flat: torch.Tensor) -> np.ndarray:
    """``(n, n)`` float64 squared Euclidean distances from one Gram matrix of the centred
    rows (computed in the rows' precision, float32 or float64)."""
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    a = flat.numpy()
    a = a - a.mean(0)
    gram = a @ a.T
    sq = gram.diagonal().astype(np.float64)
    return np.asarray(sq[:, None] + sq[None, :] - 2.0 * gram, dtype=np.float64)


def _mdav_groups(d: np.ndarray, k: int) -> list[np.ndarray]:
    """The MDAV groups of size ``k`` in order of formation, from squared distances ``d``;
    records in none of them form the last group. Grouped records get ``+inf`` in ``pen``
    (so they are never nearest, and ``-pen`` keeps them from being farthest)."""
    n = d.shape[0]
    centre = d.sum(1)  # sum of distances to the remaining records, per record
    pen = np.zeros(n)
    taken: list[np.ndarray] = []
    left, km1, inf = n, k - 1, np.inf
    argpart = np.argpartition
    while left >= 3 * k:
        r = int((centre - pen).argmax())
        row = d[r]
        s = int((row - pen).argmax())
        around_r = argpart(row + pen, km1)[:k]
        pen[around_r] = inf
        around_s = argpart(d[s] + pen, km1)[:k]
        pen[around_s] = inf
        taken += (around_r, around_s)
        centre -= d[np.concatenate((around_r, around_s))].sum(0)
        left -= 2 * k
    if left >= 2 * k:
        r = int((centre - pen).argmax())
        taken.append(argpart(d[r] + pen, km1)[:k])
    return taken


def centroid_replace(x: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Replace each row by the mean of its group (differentiable: each member receives
    ``1/|G|`` of the gradient of every row of its group). Members get bit-identical rows."""
    n = int(x.shape[0])
    flat = x.reshape(n, -1)
    n_groups = int(groups.max()) + 1
    groups = groups.to(flat.device)
    sums = torch.zeros(n_groups, flat.shape[1], dtype=flat.dtype, device=flat.device)
    sums = sums.index_add(0, groups, flat)
    counts = torch.bincount(groups, minlength=n_groups).to(flat.dtype)
    return (sums / counts[:, None])[groups].reshape(x.shape)


def clip_and_noise(
    x: torch.Tensor, clip: float, sigma: float, generator: torch.Generator
) -> torch.Tensor:
    """The Gaussian mechanism per record: ``x * min(1, C / ||x||) + N(0, sigma^2 C^2 I)``."""
    n = int(x.shape[0])
    norms = x.reshape(n, -1).norm(dim=1).clamp_min(1e-12)
    scale = (clip / norms).clamp(max=1.0).reshape(n, *([1] * (x.dim() - 1)))
    out = x * scale
    if sigma > 0:
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype)
        out = out + sigma * clip * noise
    return out


@dataclass(frozen=True)
class Transmitted:
    """What one client step sends: the rows and the MDAV groups that formed them."""

    rows: torch.Tensor
    groups: torch.Tensor


@dataclass(frozen=True)
class KDUFSL:
    """The KD-UFSL client-side defense for one public :class:`SmashedDefenseSpec`.

    ``perturb_input`` is the input-side Gaussian mechanism (identity unless
    ``where == "input"``); ``transmit`` is applied to the head's output: the smashed-side
    Gaussian mechanism (when ``where == "smashed"``), then MDAV and centroid replacement.

    Example:
        >>> import torch
        >>> from trainleak.releases.split_learning import SmashedDefenseSpec
        >>> d = KDUFSL(SmashedDefenseSpec(k=4, sigma=0.5, clip=1.0))
        >>> out = d.transmit(torch.randn(16, 8), torch.Generator().manual_seed(0))
        >>> k_anonymity(out.rows) >= 4
        True
    """

    spec: SmashedDefenseSpec

    def perturb_input(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        s = self.spec
        if s.where != "input" or s.clip is None:
            return x
        return clip_and_noise(x, s.clip, s.sigma, generator)

    def transmit(self, smashed: torch.Tensor, generator: torch.Generator) -> Transmitted:
        s = self.spec
        n = int(smashed.shape[0])
        _check_k(n, s.k)
        if not all_finite(smashed):
            raise ConfigError.invalid("smashed", "finite smashed data", "NaN or inf")
        out = smashed
        if s.where == "smashed" and s.clip is not None:
            out = clip_and_noise(out, s.clip, s.sigma, generator)
        if s.k == 1:
            return Transmitted(out, torch.arange(n))
        groups = mdav(out, s.k)
        return Transmitted(centroid_replace(out, groups), groups)


def all_finite(x: torch.Tensor) -> bool:
    """Whether every entry of ``x`` is finite (its largest and smallest entries are: both
    reductions propagate NaN; cheaper than an elementwise ``isfinite`` on big batches)."""
    if x.numel() == 0:
        return True
    return bool(torch.isfinite(torch.stack([x.detach().amax(), x.detach().amin()])).all())


def k_anonymity(rows: torch.Tensor) -> int:
    """The smallest number of times any row of ``rows`` occurs (exact, bit-identical rows);
    the batch is k-anonymous iff this is at least k. 0 for an empty batch."""
    n = int(rows.shape[0])
    if n == 0:
        return 0
    flat = rows.detach().reshape(n, -1).contiguous()
    _, counts = torch.unique(flat, dim=0, return_counts=True)
    return int(counts.min())
