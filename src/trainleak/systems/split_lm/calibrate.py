"""MIXGUARD's calibration phase: fit the client's calibrator on public data.

On public sequences the client may ask the server for both ``S(h~)`` (the mixed row) and
``S(h)`` (the clean row with the same decoys), and fits ``C`` to minimise
``||C(S(h~), secrets) - S(h)||^2`` (seed-briefs-2 §10, phase 1). The client also caches the
server's outputs for its auxiliary pool (public rows: nothing private is revealed, and the
server does not learn which of them are mixed into a row), refreshed at every re-fit because
the trunk moves while it trains. The residual on held-out public probe rows,
``rho = ||C(S(h~)) - S(h)|| / ||S(h)||``, sets MIXGUARD's gradient noise.
"""

from __future__ import annotations

import torch

from trainleak.defenses.split_text import Calibrator, Obfuscated, obfuscate, pad_to, residual
from trainleak.errors import ConfigError
from trainleak.models.split_lm import SplitLM
from trainleak.releases.split_text import TextDefenseSpec

PROBE_ROWS = 32
POOL_ROWS = 256


def aux_pool(public_ids: torch.Tensor) -> torch.Tensor:
    """The client's auxiliary pool: up to ``POOL_ROWS`` public rows, never the probe rows.

    Raises:
        ConfigError: fewer than ``PROBE_ROWS + 2`` public rows.
    """
    if public_ids.shape[0] < PROBE_ROWS + 2:
        raise ConfigError.invalid(
            "public_ids", f"at least {PROBE_ROWS + 2} rows", public_ids.shape[0]
        )
    return public_ids[:-PROBE_ROWS][:POOL_ROWS]


def trunk_cache(model: SplitLM, pool: torch.Tensor, width: int) -> torch.Tensor:
    """``(pool, width, d)`` the server's outputs for the auxiliary pool as mixed (full mask)."""
    ids = pad_to(pool, width, int(model.lm.tokenizer.pad_token_id))
    ones = torch.ones_like(ids)
    with torch.no_grad():
        return model.trunk(model.bottom(ids, ones), ones)


def _pair(
    model: SplitLM,
    spec: TextDefenseSpec,
    ids: torch.Tensor,
    pool: torch.Tensor,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, Obfuscated]:
    tok = model.lm.tokenizer
    mask = (ids != tok.pad_token_id).long()
    mask[:, 0] = 1
    ob = obfuscate(spec, ids, mask, model.bottom, pool, len(tok), int(tok.pad_token_id), gen)
    with torch.no_grad():
        mixed = model.trunk(ob.hidden, ob.mask)
        clean = model.trunk(model.bottom(ob.ids, ob.mask), ob.mask)
    return mixed, clean, ob


def probe_residual(
    model: SplitLM,
    calib: Calibrator | None,
    spec: TextDefenseSpec,
    public_ids: torch.Tensor,
    gen: torch.Generator,
    cache: torch.Tensor | None = None,
) -> float:
    """The calibration residual on the held-out public probe rows (the last ``PROBE_ROWS``);
    ``calib=None`` measures the uncalibrated residual (the server output un-signed only)."""
    pool = aux_pool(public_ids)
    mixed, clean, ob = _pair(model, spec, public_ids[-PROBE_ROWS:], pool, gen)
    with torch.no_grad():
        pred = calib(mixed, ob, cache) if calib is not None else mixed * ob.signs
    return residual(pred, clean, ob.mask)


def fit_calibrator(
    model: SplitLM,
    calib: Calibrator,
    spec: TextDefenseSpec,
    public_ids: torch.Tensor,
    steps: int,
    gen: torch.Generator,
    width: int,
    batch_size: int = 32,
    lr: float = 3e-3,
) -> tuple[float, torch.Tensor]:
    """Refresh the pool cache at ``width`` columns, fit ``calib`` for ``steps`` Adam steps on
    public rows (all but the probe rows); returns the probe residual and the cache."""
    pool = aux_pool(public_ids)
    cache = trunk_cache(model, pool, width)
    train = public_ids[:-PROBE_ROWS]
    opt = torch.optim.Adam(calib.parameters(), lr=lr)
    for _ in range(steps):
        idx = torch.randint(0, train.shape[0], (batch_size,), generator=gen)
        mixed, clean, ob = _pair(model, spec, train[idx], pool, gen)
        keep = ob.mask.bool()
        loss = (calib(mixed, ob, cache) - clean)[keep].pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return probe_residual(model, calib, spec, public_ids, gen, cache), cache
