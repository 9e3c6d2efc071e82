"""The non-split reference: the same model, trainable parts and budget, trained in one place."""

from __future__ import annotations

import torch
from torch import nn

from trainleak.models.language import LanguageModel
from trainleak.models.split_lm import LMSplit
from trainleak.systems.split_lm.train import SplitTrainingConfig, _pool, _prepare


def train_nonsplit(
    public_lm: LanguageModel,
    split: LMSplit,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    cfg: SplitTrainingConfig,
    seed: int = 0,
) -> float:
    """Train the parts the split run trains (trunk, top, head; bottom frozen) with the same
    steps, batches and learning rates on the unsplit model; returns test accuracy."""
    ids, mask, labels = data
    gen = torch.Generator().manual_seed(seed)
    model, head, server_p, client_p = _prepare(public_lm, split, cfg, int(labels.max()) + 1, seed)
    s_opt = torch.optim.Adam(server_p, lr=cfg.lr_server)
    c_opt = torch.optim.Adam(client_p, lr=cfg.lr_client)
    for _ in range(cfg.steps):
        idx = torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=gen)
        real = mask[idx].bool().clone()
        real[:, 0] = False
        logits = head(_pool(model.full(ids[idx], mask[idx]), real))
        loss = nn.functional.cross_entropy(logits, labels[idx])
        s_opt.zero_grad(set_to_none=True)
        c_opt.zero_grad(set_to_none=True)
        loss.backward()
        s_opt.step()
        c_opt.step()
    t_ids, t_mask, t_labels = test
    with torch.no_grad():
        real = t_mask.bool().clone()
        real[:, 0] = False
        pred = head(_pool(model.full(t_ids, t_mask), real)).argmax(1)
    return float((pred == t_labels).float().mean())
