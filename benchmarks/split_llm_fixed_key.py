"""Diagnostic (issue 13, MIXGUARD utility): a fixed per-run secret orthogonal key instead of
per-batch secrets. Not a library defense: the split run is patched from here.

The client sends ``h Q`` (``Q`` a secret random orthogonal ``d x d`` matrix drawn once per run,
no mixing, no decoys) and un-rotates the trunk output (``S(h Q) Q^T``); the server fine-tunes
its trunk fully on what it receives, as in the experiment. Measured: task accuracy (against
the experiment's non-split 1.000), then what a server that knows the scheme but not ``Q``
recovers: the plain inverter on ``h Q``; the same inverter after aligning the transcript's
principal axes with those of the public records' bottom outputs (second moments, axis signs
from third moments: the key estimated from the transcript alone); and, as an upper bound, after
un-rotating with the true key; then ``REFINE`` rounds of self-training Procrustes from the
aligned estimate; and finally ``gram_decode``, which needs no key estimate: a rotation keeps
every inner product, so greedy decoding against the sent rows' own Gram entries is exact
(token and slot recovery 1.000 when measured; the lead is closed).

Usage: ``python benchmarks/split_llm_fixed_key.py`` (about 6 minutes on a quiet core). Writes
``benchmarks/results/split_llm_fixed_key.json``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

import trainleak.systems.split_lm.train as split_train
from trainleak.attacks.split_lm._common import (
    embedding_table,
    fit_inverter,
    public_bottom,
    training_pairs,
)
from trainleak.defenses.split_text import Obfuscated
from trainleak.experiments.split_llm_mixguard import training_config, world
from trainleak.experiments.split_llm_mixguard_claims import SplitLLMMixGuardConfig
from trainleak.models.split_lm import LMSplit, SplitLM
from trainleak.releases.split_text import TextDefenseSpec
from trainleak.scenarios.split_llm import run_defense, score

OUT = Path(__file__).resolve().parent / "results"


def patch_key(key: torch.Tensor) -> None:
    """Rotate what the client sends by ``key`` and un-rotate the trunk's output."""
    obfuscate, trunk = split_train.obfuscate, SplitLM.trunk

    def keyed(*args: Any, **kwargs: Any) -> Obfuscated:
        ob = obfuscate(*args, **kwargs)
        return dataclasses.replace(ob, hidden=ob.hidden @ key)

    def unrotated(self: SplitLM, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return trunk(self, hidden, mask) @ key.T

    split_train.obfuscate = keyed  # type: ignore[assignment]
    SplitLM.trunk = unrotated  # type: ignore[method-assign]


def align(public: torch.Tensor, sent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The key's transpose estimated from unpaired samples: eigenvectors of the two
    covariances paired by rank, signs from third moments; and ``|<v_i, Q^T u_i>|`` is computed
    by the caller from the eigenvectors returned."""
    out = []
    for x in (public, sent):
        lam, vec = torch.linalg.eigh(torch.cov(x.T))
        out.append((x.mean(0), vec))
    (mp, u), (mt, v) = out
    signs = torch.sign(((public - mp) @ u).pow(3).mean(0) * ((sent - mt) @ v).pow(3).mean(0))
    return v @ torch.diag(signs) @ u.T, torch.stack([u, v])


def refine(
    inv: torch.nn.Module, bottom: SplitLM, sent: torch.Tensor, mask: torch.Tensor, est: torch.Tensor
) -> list[torch.Tensor]:
    """Self-training Procrustes: decode with the current estimate, re-encode the decoded
    tokens through the public bottom, fit the orthogonal map from the sent rows to those
    states (SVD), repeat; returns the estimate after each of ``REFINE`` rounds. Position 0 is
    the public BOS token."""
    keep, out = mask.bool(), []
    bos = sent.new_full((sent.shape[0],), int(bottom.lm.tokenizer.bos_token_id)).long()
    with torch.no_grad():
        for _ in range(REFINE):
            tok = inv(sent @ est).argmax(-1)
            tok[:, 0] = bos
            states = bottom.bottom(tok, mask)
            a, _, b = torch.linalg.svd(sent[keep].T @ states[keep])
            est = a @ b
            out.append(est)
    return out


REFINE = 12


def gram_decode(bottom: SplitLM, sent: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Greedy exact decoding from rotation invariants (no key estimate at all).

    The bottom is public, frozen and causal, so the state at position ``t`` is a known function
    of tokens ``0..t``. A secret orthogonal ``Q`` preserves every inner product:
    ``<h_t Q, h_j Q> = <h_t, h_j>``. For each position, every vocabulary token ``v`` is appended
    to the decoded prefix and scored by how well the inner products of its state with the
    prefix's states (and its squared norm) match the sent rows' own Gram entries; the best is
    kept. Position 0 is the public BOS token."""
    n, length, _ = sent.shape
    vocab = len(bottom.lm.tokenizer)
    bos = int(bottom.lm.tokenizer.bos_token_id)
    out = torch.full((n, length), int(bottom.lm.tokenizer.pad_token_id), dtype=torch.long)
    cand = torch.arange(vocab)
    with torch.no_grad():
        for i in range(n):
            real = int(mask[i].sum())
            prefix = torch.tensor([bos])
            gram = sent[i, :real] @ sent[i, :real].T
            for t in range(1, real):
                tok = torch.cat([prefix.expand(vocab, t), cand[:, None]], 1)
                states = bottom.bottom(tok, torch.ones_like(tok))
                own = states[0, :t]  # the prefix's states (identical in every row)
                c = states[:, t]
                feats = torch.cat([c @ own.T, (c * c).sum(1, keepdim=True)], 1)
                want = torch.cat([gram[t, :t], gram[t, t : t + 1]])
                prefix = torch.cat([prefix, cand[(feats - want).pow(2).sum(1).argmin()][None]])
            out[i, :real] = prefix
    return out


def main() -> None:
    cfg = SplitLLMMixGuardConfig()
    key, _ = torch.linalg.qr(
        torch.randn(cfg.n_embd, cfg.n_embd, generator=torch.Generator().manual_seed(123))
    )
    trunk = SplitLM.trunk
    w = world(cfg)
    patch_key(key)
    split = LMSplit(cfg.bottom_end, cfg.top_start)
    run, acc = run_defense(w, split, TextDefenseSpec(), training_config(cfg), cfg.seed)
    SplitLM.trunk = trunk  # type: ignore[method-assign]
    t, gen = run.transcript, torch.Generator().manual_seed(0)
    h, ids, keep = training_pairs(
        public_bottom(t), w.public_ids, TextDefenseSpec(), False, gen, 1.0
    )
    inv = fit_inverter((h, ids, keep), embedding_table(t), cfg.inverter_steps, 3e-3, 256, 256, gen)
    n_rec = cfg.n_public_records * w.public_ids.shape[1]  # the public records come first
    est, (u, v) = align(h[:n_rec][keep[:n_rec]], t.smashed[t.mask.bool()])
    cos = (v.T @ key.T @ u).diagonal().abs()
    res: dict[str, Any] = {"accuracy": acc, "axis_alignment_mean": float(cos.mean())}
    res["axis_alignment_top10"] = [float(c) for c in cos[-10:]]
    pad = int(w.lm.tokenizer.pad_token_id)
    with torch.no_grad():
        for name, x in (
            ("plain", t.smashed),
            ("aligned", t.smashed @ est),
            ("true key", t.smashed @ key.T),
        ):
            s = score(inv(x).argmax(-1), run, w.slot_ids, pad)
            res[name] = {"token_recovery": s.token_recovery, "slot_recovery": s.slot_recovery}
        rounds = refine(inv, public_bottom(t), t.smashed, t.mask, est)
        res["refined"] = []
        for r in rounds:
            s = score(inv(t.smashed @ r).argmax(-1), run, w.slot_ids, pad)
            res["refined"].append(
                {"token_recovery": s.token_recovery, "slot_recovery": s.slot_recovery}
            )
        tok = gram_decode(public_bottom(t), t.smashed, t.mask)
        s = score(tok, run, w.slot_ids, pad)
        res["gram_invariants"] = {
            "token_recovery": s.token_recovery,
            "slot_recovery": s.slot_recovery,
        }
    OUT.mkdir(exist_ok=True)
    (OUT / "split_llm_fixed_key.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
