"""The references of split fine-tuning: the non-split model (the same trainable parts and budget,
trained in one place) and the client alone (its top on its own bottom output, no server)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from trainleak.models.language import LanguageModel
from trainleak.models.split_lm import LMSplit
from trainleak.systems.split_lm.train import SplitTrainingConfig, _pool, _prepare, schedulers


def train_reference(
    public_lm: LanguageModel,
    split: LMSplit,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    cfg: SplitTrainingConfig,
    seed: int = 0,
    *,
    trunk: bool = True,
) -> float:
    """Train a reference with the split run's steps, batches, learning rates and schedule, the
    bottom frozen; returns test accuracy.

    ``trunk=True``: the non-split model (trunk, top and head trained in one place).
    ``trunk=False``: the client alone, its top and head on its own bottom's output with the
    trunk skipped. A split defense whose accuracy is at or below the client alone gains the
    client nothing from the split, and a defense whose calibrator leans on the client's own
    state (MIXGUARD's ``anchored`` calibrator) should be read against it."""
    ids, mask, labels = data
    gen = torch.Generator().manual_seed(seed)
    model, head, server_p, client_p = _prepare(public_lm, split, cfg, int(labels.max()) + 1, seed)
    opts = [torch.optim.Adam(client_p, lr=cfg.lr_client)]
    if trunk:
        opts.append(torch.optim.Adam(server_p, lr=cfg.lr_server))
    scheds = schedulers(cfg, *opts)

    def alone(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            h = model.bottom(x, m)
        return model.top(h, m)  # type: ignore[no-any-return]

    forward = model.full if trunk else alone
    for _ in range(cfg.steps):
        idx = torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=gen)
        real = mask[idx].bool().clone()
        real[:, 0] = False
        logits = head(_pool(forward(ids[idx], mask[idx]), real))
        loss = nn.functional.cross_entropy(logits, labels[idx])
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in opts:
            opt.step()
        for sch in scheds:
            sch.step()
    return _test_accuracy(forward, head, test)


def _test_accuracy(
    forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    head: nn.Module,
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> float:
    t_ids, t_mask, t_labels = test
    with torch.no_grad():
        real = t_mask.bool().clone()
        real[:, 0] = False
        pred = head(_pool(forward(t_ids, t_mask), real)).argmax(1)
    return float((pred == t_labels).float().mean())
