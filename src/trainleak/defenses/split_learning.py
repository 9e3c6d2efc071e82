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
    Golub and Van Loan, "Matrix Computations", 4th ed., 2013, section 8.2.4 (orthogonal
    iteration: the principal subspace MDAV can group on, ``sketch=m``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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


def mdav(x: torch.Tensor, k: int, basis: np.ndarray | None = None) -> torch.Tensor:
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

    With a ``basis`` ``V`` (``(d, m)``) the same algorithm runs on the sketch ``x V`` (every
    distance measured in that subspace): the partners differ from exact MDAV's where the
    subspace misses what separates records; the group sizes (hence k-anonymity after
    :func:`centroid_replace`, in the full space) do not. On the sketch the loop computes
    only the distances each step needs, compiled with numba when the ``fast`` extra is
    installed (``O(n^2 m / k)``, no Gram matrix); without it, through the distance matrix
    of the sketch (the same groups). :class:`SubspaceSketch` keeps ``V`` on the principal
    subspace of the records.

    Args:
        x: ``(n, ...)`` records (flattened internally).
        k: the minimum group size, ``1 <= k <= n``.
        basis: ``None`` (exact), or a ``(d, m)`` matrix to project the records on.

    Returns:
        ``(n,)`` int64 group ids ``0 .. G-1`` (on the CPU).

    Raises:
        ConfigError: ``k`` below 1 or larger than the batch; a basis whose rows do not match
            the records' dimension.
    """
    n = int(x.shape[0])
    _check_k(n, k)
    flat = x.detach().reshape(n, -1).cpu()
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    if basis is not None and (basis.ndim != 2 or basis.shape[0] != flat.shape[1]):
        raise ConfigError.invalid(
            "basis", f"a ({flat.shape[1]}, m) matrix for {flat.shape[1]}-dim records", basis.shape
        )
    if k == 1:
        return torch.arange(n)
    if basis is not None:  # numpy's product: a narrow one is several times torch's speed
        return _sketch_groups(flat.numpy() @ basis.astype(flat.numpy().dtype, copy=False), k)
    return _distance_groups(flat, k)


def _distance_groups(flat: torch.Tensor, k: int) -> torch.Tensor:
    """MDAV group ids of the ``(n, d)`` rows of ``flat`` through their distance matrix."""
    taken = _mdav_groups(_squared_distances(flat), k)
    groups = np.full(int(flat.shape[0]), len(taken), dtype=np.int64)  # the remainder: last
    if taken:
        groups[np.concatenate(taken)] = np.arange(len(taken)).repeat(k)
    return torch.from_numpy(groups)


def _sketch_groups(z: np.ndarray, k: int) -> torch.Tensor:
    """MDAV group ids of the sketch ``z`` (``(n, m)``): the compiled direct loop, or without
    the ``fast`` extra the distance-matrix path (the same groups)."""
    kernel = compiled_kernel()
    if kernel is not None:
        return torch.from_numpy(kernel(np.ascontiguousarray(z), k))
    return _distance_groups(torch.from_numpy(z), k)


class SubspaceSketch:
    """The basis MDAV groups on when ``SmashedDefenseSpec.sketch = m``: an ``m``-dimensional
    subspace tracked by orthogonal iteration on the batches the client sends.

    It starts from a random orthonormal basis (seeded: nothing about the data) and takes one
    warm-started step ``V <- orth(X_c^T X_c V)`` on the centred batch ``X_c`` after batches
    1, 2, 4, 8, ... (so the start is left quickly) and after every ``refresh``-th batch
    (orthogonal iteration; Golub and Van Loan, section 8.2.4). Over training the basis
    follows the top principal subspace of the smashed data as the head changes. A step
    reuses the sketch ``z = X V`` the grouping computed, as ``X_c^T X_c V = X^T (z - mean
    z)``: one thin product and a Gram-Schmidt orthonormalisation of ``m`` vectors. The basis
    never leaves the client; it decides only who is grouped with whom, never how many.

    Example:
        >>> sk = SubspaceSketch(m=4, refresh=1)
        >>> x = torch.randn(64, 32) @ torch.diag(torch.linspace(3, 0.1, 32))
        >>> for _ in range(20):
        ...     groups = sk.group(x, 4)
        >>> bool(torch.bincount(groups).min() >= 4)
        True
    """

    def __init__(self, m: int, refresh: int = 16, seed: int = 0) -> None:
        for name, v in (("sketch", m), ("sketch_refresh", refresh)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError.invalid(name, "an integer >= 1", v)
        self.m, self.refresh, self.seed = m, refresh, seed
        self.basis: np.ndarray | None = None
        self.batches = 0

    def due(self) -> bool:
        """Whether the batch just grouped is followed by a tracking step."""
        b = self.batches
        return b % self.refresh == 0 or b & (b - 1) == 0

    def group(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """MDAV groups of ``x`` on the current basis (see :func:`mdav`), then the tracking
        step when one is due."""
        n = int(x.shape[0])
        _check_k(n, k)
        rows = x.detach().reshape(n, -1)
        if rows.device.type != "cpu" or rows.dtype != torch.float32:
            rows = rows.cpu().float()
        flat = rows.numpy()
        d = int(flat.shape[1])
        if self.basis is None or self.basis.shape[0] != d:
            start = np.random.default_rng(self.seed).standard_normal((d, min(self.m, d)))
            self.basis = np.asarray(np.linalg.qr(start)[0], dtype=np.float32)
        z = flat @ self.basis
        groups = torch.arange(n) if k == 1 else _sketch_groups(z, k)
        self.batches += 1
        if self.due() and n > 1:
            yt = ((z - z.mean(0)).T @ flat).astype(np.float64)  # (X_c^T X_c V)^T
            q = _orthonormal_rows(yt)
            if q is not None:  # else (non-finite or rank-deficient) keep the basis
                self.basis = q.T.astype(np.float32)
        return groups


def _orthonormal_rows(yt: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis of the rows of ``yt`` (``(m, d)``, float64), in order, or
    ``None`` when they are not finite or not independent: Gram-Schmidt run twice per row
    (Giraud, Langou and Rozloznik, "The loss of orthogonality in the Gram-Schmidt
    orthogonalization process", Comput. Math. Appl. 50, 2005: twice is enough), compiled
    with the ``fast`` extra; otherwise Householder QR (the same subspace)."""
    if not np.isfinite(yt).all():
        return None
    kernels = _compiled()
    if kernels is None:
        q, r = np.linalg.qr(yt.T)
        small = np.abs(np.diag(r)) <= 1e-10 * max(float(np.abs(r).max()), 1e-300)
        return None if small.any() else np.ascontiguousarray(q.T)
    q = yt.copy()
    return q if kernels[1](q) else None


def _gram_schmidt_twice(q: np.ndarray) -> bool:
    """Orthonormalise the rows of ``q`` in place (classical Gram-Schmidt, each row twice);
    ``False`` if a row loses all but ``1e-10`` of its norm (dependent rows)."""
    m, d = q.shape
    for j in range(m):
        start = 0.0
        for t in range(d):
            start += q[j, t] * q[j, t]
        for _ in range(2):
            for i in range(j):
                dot = 0.0
                for t in range(d):
                    dot += q[i, t] * q[j, t]
                for t in range(d):
                    q[j, t] -= dot * q[i, t]
        norm = 0.0
        for t in range(d):
            norm += q[j, t] * q[j, t]
        if not norm > 1e-20 * start or start == 0.0:
            return False
        norm = np.sqrt(norm)
        for t in range(d):
            q[j, t] /= norm
    return True


def _sq_dist(zt: np.ndarray, left: int, point: np.ndarray, out: np.ndarray) -> None:
    """``out[p]`` = squared distance of column ``p < left`` of ``zt`` (``(m, n)``, one
    coordinate a row, so the inner loop runs along contiguous memory) to ``point``."""
    for p in range(left):
        out[p] = 0.0
    for j in range(zt.shape[0]):
        c = point[j]
        row = zt[j]
        for p in range(left):
            t = row[p] - c
            out[p] += t * t


def _farthest(dist: np.ndarray, ids: np.ndarray, left: int) -> int:
    """The position of the largest of ``dist[:left]`` (the lowest record id on ties)."""
    best, at = -1.0, 0
    for p in range(left):
        v = dist[p]
        if v > best or (v == best and ids[p] < ids[at]):
            best, at = v, p
    return at


def _nearest(
    dist: np.ndarray, ids: np.ndarray, left: int, k: int, pos: np.ndarray, val: np.ndarray
) -> None:
    """``pos[:k]``: the positions of the ``k`` smallest of ``dist[:left]`` (lowest record id
    on ties), found in one pass with an insertion buffer."""
    for t in range(k):
        val[t] = np.inf
        pos[t] = -1
    last = k - 1
    for p in range(left):
        v = dist[p]
        if v < val[last] or (v == val[last] and ids[p] < ids[pos[last]]):
            q = last
            while q > 0 and (v < val[q - 1] or (v == val[q - 1] and ids[p] < ids[pos[q - 1]])):
                val[q] = val[q - 1]
                pos[q] = pos[q - 1]
                q -= 1
            val[q] = v
            pos[q] = p


def _take(
    zt: np.ndarray,
    ids: np.ndarray,
    left: int,
    k: int,
    pos: np.ndarray,
    gid: int,
    groups: np.ndarray,
    total: np.ndarray,
) -> int:
    """Put the records at ``pos[:k]`` in group ``gid``, take them from the running ``total``
    and from the first ``left`` columns (each replaced by the last column, in decreasing
    position order so no pending position moves); the number left."""
    for a in range(1, k):  # sort pos[:k] in decreasing order
        v, b = pos[a], a
        while b > 0 and pos[b - 1] < v:
            pos[b] = pos[b - 1]
            b -= 1
        pos[b] = v
    for t in range(k):
        p = pos[t]
        groups[ids[p]] = gid
        left -= 1
        for j in range(zt.shape[0]):
            total[j] -= zt[j, p]
            zt[j, p] = zt[j, left]
        ids[p] = ids[left]
    return left


def _direct_groups(z: np.ndarray, k: int) -> np.ndarray:
    """MDAV group ids of the rows of ``z`` (float32 or float64), in the order and numbering of
    :func:`mdav`, computing at each step only the distances the step needs (to the centroid,
    to ``r``, to ``s``) over the records left, kept compacted; the centroid is a running sum.
    ``O(n^2 m / k)``: for a low-dimensional sketch far less than a Gram matrix of the
    records. Meant to be compiled (numba); ties go to the lowest record id, as in the
    distance-matrix path."""
    n, m = z.shape
    zt = np.ascontiguousarray(z.T)
    ids = np.arange(n)
    groups = np.full(n, -1, np.int64)
    total = np.zeros(m)
    for j in range(m):
        acc = 0.0
        for p in range(n):
            acc += zt[j, p]
        total[j] = acc
    dist = np.empty(n, z.dtype)  # float32 sketches keep float32 passes (twice the lanes)
    centre, at_r, at_s = np.empty(m, z.dtype), np.empty(m, z.dtype), np.empty(m, z.dtype)
    pos, val = np.empty(k, np.int64), np.empty(k, z.dtype)
    left, gid = n, 0
    while left >= 2 * k:
        for j in range(m):
            centre[j] = total[j] / left
        _sq_dist(zt, left, centre, dist)
        r = _farthest(dist, ids, left)
        for j in range(m):
            at_r[j] = zt[j, r]
        _sq_dist(zt, left, at_r, dist)
        if left < 3 * k:  # one group around r; the rest form the last
            _nearest(dist, ids, left, k, pos, val)
            left = _take(zt, ids, left, k, pos, gid, groups, total)
            gid += 1
            break
        s = _farthest(dist, ids, left)
        for j in range(m):
            at_s[j] = zt[j, s]
        _nearest(dist, ids, left, k, pos, val)
        left = _take(zt, ids, left, k, pos, gid, groups, total)
        _sq_dist(zt, left, at_s, dist)
        _nearest(dist, ids, left, k, pos, val)
        left = _take(zt, ids, left, k, pos, gid + 1, groups, total)
        gid += 2
    for p in range(left):
        groups[ids[p]] = gid
    return groups


_Kernels = tuple[Callable[[np.ndarray, int], np.ndarray], Callable[[np.ndarray], bool]]
_KERNELS: list[_Kernels | None] = []  # filled on first use


def _compiled() -> _Kernels | None:
    """:func:`_direct_groups` and :func:`_gram_schmidt_twice` compiled with numba (the
    ``fast`` extra), or ``None`` without it. Compiled on first use (numba's import and
    compilation cost nothing until a sketched MDAV runs) and cached on disk by numba."""
    if not _KERNELS:
        try:
            import numba
        except ImportError:
            _KERNELS.append(None)
        else:
            jit = numba.njit(cache=True, nogil=True)
            names = ("_sq_dist", "_farthest", "_nearest", "_take")
            globals().update({name: jit(globals()[name]) for name in names})
            # reassociating the dot products lets them vectorise (4x faster here); the second
            # Gram-Schmidt pass absorbs the rounding
            orth = numba.njit(cache=True, nogil=True, fastmath=True)(_gram_schmidt_twice)
            _KERNELS.append((jit(_direct_groups), orth))
    return _KERNELS[0]


def compiled_kernel() -> Callable[[np.ndarray, int], np.ndarray] | None:
    """The compiled MDAV loop on a sketch (:func:`_direct_groups`), or ``None`` without the
    ``fast`` extra."""
    kernels = _compiled()
    return None if kernels is None else kernels[0]


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
    trackers: dict[int, SubspaceSketch] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def tracker(self, client: int = 0) -> SubspaceSketch | None:
        """Client ``client``'s tracked subspace when the spec has a ``sketch`` (each client
        keeps its own, fed only its own batches, and never sends it), else ``None``."""
        if self.spec.sketch is None:
            return None
        if client not in self.trackers:
            self.trackers[client] = SubspaceSketch(self.spec.sketch, self.spec.sketch_refresh)
        return self.trackers[client]

    def perturb_input(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        s = self.spec
        if s.where != "input" or s.clip is None:
            return x
        return clip_and_noise(x, s.clip, s.sigma, generator)

    def transmit(
        self, smashed: torch.Tensor, generator: torch.Generator, client: int = 0
    ) -> Transmitted:
        """What client ``client`` sends for its batch ``smashed`` (its own tracked subspace
        when the spec has a ``sketch``)."""
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
        sketch = self.tracker(client)
        groups = mdav(out, s.k) if sketch is None else sketch.group(out, s.k)
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
