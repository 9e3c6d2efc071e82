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


def _take(d: torch.Tensor, alive: torch.Tensor, centre: int, k: int) -> torch.Tensor:
    """The ``k`` alive records nearest to ``centre`` (itself included)."""
    dist = torch.where(alive, d[centre], torch.full_like(d[centre], float("inf")))
    return torch.topk(dist, k, largest=False).indices


def mdav(x: torch.Tensor, k: int) -> torch.Tensor:
    """MDAV microaggregation: a group id for each row of ``x``, every group of size >= k.

    While at least ``3k`` records remain: ``r`` = the record farthest from the centroid of
    the remaining ones, group it with its ``k - 1`` nearest; ``s`` = the record farthest from
    ``r``, group it likewise. With ``2k .. 3k - 1`` left, one group around the farthest
    record and the rest as a second group; with fewer, one group. Cost ``O(n^2 d)`` for the
    distance matrix plus ``O(n^2 / k)`` for the selection.

    Args:
        x: ``(n, ...)`` records (flattened internally).
        k: the minimum group size, ``1 <= k <= n``.

    Returns:
        ``(n,)`` int64 group ids ``0 .. G-1``.

    Raises:
        ConfigError: ``k`` below 1 or larger than the batch.
    """
    n = int(x.shape[0])
    _check_k(n, k)
    if k == 1:
        return torch.arange(n)
    flat = x.detach().reshape(n, -1).double()
    d = torch.cdist(flat, flat)
    groups = torch.full((n,), -1, dtype=torch.int64)
    alive = torch.ones(n, dtype=torch.bool)
    gid = 0
    while int(alive.sum()) >= 3 * k:
        centroid = flat[alive].mean(0, keepdim=True)
        far = torch.cdist(centroid, flat)[0].masked_fill(~alive, -1.0)
        r = int(far.argmax())
        s = int(d[r].masked_fill(~alive, -1.0).argmax())
        for centre in (r, s):
            members = _take(d, alive, centre, k)
            groups[members], alive[members] = gid, False
            gid += 1
    left = int(alive.sum())
    if left >= 2 * k:
        centroid = flat[alive].mean(0, keepdim=True)
        r = int(torch.cdist(centroid, flat)[0].masked_fill(~alive, -1.0).argmax())
        members = _take(d, alive, r, k)
        groups[members], alive[members] = gid, False
        gid += 1
    groups[alive] = gid
    return groups


def centroid_replace(x: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Replace each row by the mean of its group (differentiable: each member receives
    ``1/|G|`` of the gradient of every row of its group). Members get bit-identical rows."""
    n = int(x.shape[0])
    flat = x.reshape(n, -1)
    n_groups = int(groups.max()) + 1
    sums = torch.zeros(n_groups, flat.shape[1], dtype=flat.dtype).index_add(0, groups, flat)
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
        if not bool(torch.isfinite(smashed).all()):
            raise ConfigError.invalid("smashed", "finite smashed data", "NaN or inf")
        out = smashed
        if s.where == "smashed" and s.clip is not None:
            out = clip_and_noise(out, s.clip, s.sigma, generator)
        if s.k == 1:
            return Transmitted(out, torch.arange(n))
        groups = mdav(out, s.k)
        return Transmitted(centroid_replace(out, groups), groups)


def k_anonymity(rows: torch.Tensor) -> int:
    """The smallest number of times any row of ``rows`` occurs (exact, bit-identical rows);
    the batch is k-anonymous iff this is at least k. 0 for an empty batch."""
    n = int(rows.shape[0])
    if n == 0:
        return 0
    flat = rows.detach().reshape(n, -1).contiguous()
    _, counts = torch.unique(flat, dim=0, return_counts=True)
    return int(counts.min())
