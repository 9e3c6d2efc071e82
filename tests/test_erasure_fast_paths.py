"""The fast paths of erasure decoding equal the dense formulations they replaced.

The pivot chain restricted to non-zero pairs (NumPy loop) against the dense chain kept in
``tests/reference_certificate.py``; the decoder's two-column coefficients against the full
per-label deltas; the pruned duplicate check against the all-pairs distance matrix; merged
repeated rows against plain products; the factored linearisation of an imprint layer against
the direct one. Random cases in both modes, fixed seeds.
"""

from __future__ import annotations

import math

import pytest
import torch

from reference_certificate import pivot_chain_dense, refine_chain_dense
from release_fixtures import tiny_honest_update, tiny_malicious_update
from trainleak.attacks.gradient import _certify, _linearisation
from trainleak.attacks.gradient._certificate import Chain
from trainleak.attacks.gradient._certificate_pivot import pivot_chain
from trainleak.attacks.gradient._certificate_refine import refine_chain
from trainleak.attacks.gradient._common import release_model
from trainleak.attacks.gradient._linearisation import linearise
from trainleak.attacks.gradient.erasure import ErasureDecodingActive, ErasureDecodingPassive
from trainleak.linalg import RowGroups, later_duplicates
from trainleak.models.functional import FirstLayerSplit


def _close(fast: Chain, dense: Chain) -> None:
    assert fast.order == dense.order
    assert torch.equal(fast.label_ok, dense.label_ok)
    fin = torch.isfinite(dense.error)
    assert torch.equal(torch.isfinite(fast.error), fin)
    assert torch.allclose(fast.error[fin], dense.error[fin], rtol=1e-12, atol=0)
    assert torch.allclose(fast.dev_c, dense.dev_c, rtol=1e-12, atol=1e-300)


def test_sparse_pivot_chain_and_refinement_equal_the_dense_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Chain, Chain]] = []
    refined = 0

    def chain(lin, resid, slack, tol):  # type: ignore[no-untyped-def]
        fast = pivot_chain(lin, resid, slack, tol)
        seen.append((fast, pivot_chain_dense(lin, resid, slack, tol)))
        return fast

    def refine(lin, resid, slack, start):  # type: ignore[no-untyped-def]
        nonlocal refined
        fast, dense = (
            refine_chain(lin, resid, slack, start),
            refine_chain_dense(lin, resid, slack, start),
        )
        seen.append((fast, dense))
        refined += int((dense.error < start.error).sum())
        return fast

    monkeypatch.setattr(_certify, "pivot_chain", chain)
    monkeypatch.setattr(_certify, "refine_chain", refine)
    certified = 0
    for seed in range(8):
        upd, kn = tiny_malicious_update(seed, 5 + seed)
        certified += int(ErasureDecodingActive()(upd, kn).certified.sum())
        upd, kn = tiny_honest_update(seed, 2 + seed % 4)
        certified += int(ErasureDecodingPassive()(upd, kn).certified.sum())
    upd, kn = tiny_malicious_update(1, 15)  # a chain the refinement tightens
    certified += int(ErasureDecodingActive()(upd, kn).certified.sum())
    assert len(seen) >= 24 and certified >= 50 and refined >= 1  # real, certified batches
    for fast, dense in seen:
        _close(fast, dense)


@pytest.mark.parametrize("mode", ["active", "passive"])
def test_two_column_coefficients_equal_the_full_deltas(mode: str) -> None:
    upd, _ = tiny_malicious_update(3, 9) if mode == "active" else tiny_honest_update(3, 4)
    split = FirstLayerSplit(release_model(upd))
    x = torch.rand(7, split.in_dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    labels = torch.arange(3)
    full = split.deltas(x, labels)
    cols = torch.randint(0, split.width, (7, 2), generator=torch.Generator().manual_seed(2))
    part = split.deltas_at(split.pre_activation(x), labels, cols)
    expect = full.gather(2, cols.unsqueeze(1).expand(-1, 3, -1))
    assert torch.allclose(part, expect, rtol=1e-13, atol=1e-300)
    assert float(full.abs().max()) > 0


def test_pruned_duplicate_check_equals_all_pairs() -> None:
    for seed in range(60):
        gen = torch.Generator().manual_seed(seed)
        n, d = 2 + seed % 37, 1 + seed % 11
        x = torch.rand(n, d, generator=gen, dtype=torch.float64)
        x[1] = x[0] + 1e-7  # a near-duplicate and an exact one
        if n > 3:
            x[3] = x[2]
        tol = (1e-6, 1e-3, 0.3, 2.0)[seed % 4]
        dense = torch.triu(torch.cdist(x, x, p=math.inf) <= tol, diagonal=1).any(0)
        assert torch.equal(later_duplicates(x, tol), dense)


def test_row_groups_merge_repeated_rows_and_fall_back_on_honest_weights() -> None:
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(3, 20, generator=gen, dtype=torch.float64)
    rep = RowGroups(base.repeat_interleave(8, dim=0))
    honest = RowGroups(torch.randn(24, 20, generator=gen, dtype=torch.float64))
    assert rep.unique is not None and rep.unique.shape[0] == 3 and honest.unique is None
    q = torch.randn(5, 4, 24, generator=gen, dtype=torch.float64)
    x = torch.randn(6, 20, generator=gen, dtype=torch.float64)
    for rg in (rep, honest):
        assert torch.allclose(rg.left(q), q @ rg.weight, rtol=1e-12, atol=1e-12)
        assert torch.allclose(rg.right(x), x @ rg.weight.T, rtol=1e-12, atol=1e-12)
        exact = float(torch.linalg.matrix_norm(rg.weight, ord=2))
        assert abs(rg.spectral_norm() - exact) <= 1e-12 * exact


def test_factored_linearisation_equals_the_direct_products(monkeypatch: pytest.MonkeyPatch) -> None:
    upd, _ = tiny_malicious_update(2, 9)
    split = FirstLayerSplit(release_model(upd))
    transform = ErasureDecodingActive().transform(upd)
    x = torch.rand(9, split.in_dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    y = torch.randint(0, 3, (9,), generator=torch.Generator().manual_seed(5))
    fast = linearise(split, x, y, transform)
    monkeypatch.setattr(_linearisation, "factor_columns", lambda *args: None)
    direct = linearise(split, x, y, transform)
    assert fast.known_norms is not None and direct.known_norms is None  # both paths ran
    for name in ("q", "m_mat", "jpm", "grad_norm", "m_norm", "q_norm", "own_coefficients"):
        a, b = getattr(fast, name), getattr(direct, name)
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-15 * float(b.abs().max())), name
    assert float(direct.own_coefficients.abs().max()) > 0
