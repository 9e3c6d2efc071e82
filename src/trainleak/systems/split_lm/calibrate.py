"""MIXGUARD's calibration phase: fit the client's calibrator on public data.

On public sequences the client may ask the server for both ``S(h~)`` (the mixed row) and
``S(h)`` (the clean row with the same decoys), and fits ``C`` to minimise
``||C(S(h~), secrets) - S(h)||^2`` (seed-briefs-2 §10, phase 1). The residual on a held-out
public probe batch, ``rho = ||C(S(h~)) - S(h)|| / ||S(h)||``, sets MIXGUARD's gradient noise.
"""

from __future__ import annotations

import torch

from trainleak.defenses.split_text import Calibrator, obfuscate, residual
from trainleak.errors import ConfigError
from trainleak.models.split_lm import SplitLM
from trainleak.releases.split_text import TextDefenseSpec

PROBE_ROWS = 32


def _pair(
    model: SplitLM,
    spec: TextDefenseSpec,
    ids: torch.Tensor,
    aux: torch.Tensor,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    tok = model.lm.tokenizer
    mask = (ids != tok.pad_token_id).long()
    mask[:, 0] = 1
    ob = obfuscate(spec, ids, mask, model.bottom, aux, len(tok), int(tok.pad_token_id), gen)
    with torch.no_grad():
        mixed = model.trunk(ob.hidden, ob.mask)
        clean = model.trunk(model.bottom(ob.ids, ob.mask), ob.mask)
    return mixed, clean, ob.mask, ob.lam0, ob.signs


def probe_residual(
    model: SplitLM,
    calib: Calibrator | None,
    spec: TextDefenseSpec,
    public_ids: torch.Tensor,
    gen: torch.Generator,
) -> float:
    """The calibration residual on the held-out public probe rows (the last ``PROBE_ROWS``);
    ``calib=None`` measures the uncalibrated residual (the server output un-signed only)."""
    probe = public_ids[-PROBE_ROWS:]
    mixed, clean, mask, lam0, signs = _pair(model, spec, probe, public_ids[:-PROBE_ROWS], gen)
    with torch.no_grad():
        pred = calib(mixed, lam0, signs) if calib is not None else mixed * signs
    return residual(pred, clean, mask)


def fit_calibrator(
    model: SplitLM,
    calib: Calibrator,
    spec: TextDefenseSpec,
    public_ids: torch.Tensor,
    steps: int,
    gen: torch.Generator,
    batch_size: int = 32,
    lr: float = 3e-3,
) -> float:
    """Fit ``calib`` for ``steps`` Adam steps on public rows (all but the probe rows); returns
    the residual on the probe rows.

    Raises:
        ConfigError: fewer than ``PROBE_ROWS + 2`` public rows.
    """
    if public_ids.shape[0] < PROBE_ROWS + 2:
        raise ConfigError.invalid("public_ids", f"at least {PROBE_ROWS + 2} rows", public_ids.shape[0])
    train = public_ids[:-PROBE_ROWS]
    opt = torch.optim.Adam(calib.parameters(), lr=lr)
    for _ in range(steps):
        idx = torch.randint(0, train.shape[0], (batch_size,), generator=gen)
        mixed, clean, mask, lam0, signs = _pair(model, spec, train[idx], train, gen)
        keep = mask.bool()
        loss = (calib(mixed, lam0, signs) - clean)[keep].pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return probe_residual(model, calib, spec, public_ids, gen)
