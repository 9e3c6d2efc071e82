"""Split fine-tuning of a causal language model for record classification, with the trunk on an
honest-but-curious server, and the server's transcript recorded.

One step: the client runs the frozen public bottom on its batch and applies its defense
(:func:`~trainleak.defenses.split_text.obfuscate`); the server runs the trunk (fully trainable
or LoRA, Hu et al. 2022, restricted to the trunk's linear layers); the client calibrates the
server's output (MIXGUARD), runs its top (the last blocks, the final norm, mean pooling over
real tokens and a linear classifier; the top attends to the real positions only, the decoys
dropped), and returns the gradient at the trunk output (perturbed
under MIXGUARD); the server back-propagates through the trunk and returns the gradient at the
cut. The server records what it received and returned (SplitLLM's protocol, Chen et al. 2024).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from trainleak.defenses.split_text import Calibrator, Obfuscated, obfuscate, perturb_gradient
from trainleak.errors import ConfigError
from trainleak.models.language import LanguageModel, LoraSettings, add_lora
from trainleak.models.split_lm import LMSplit, SplitLM, seeded_init
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript
from trainleak.systems.split_lm.calibrate import aux_pool, fit_calibrator
from trainleak.validation import check_fields, param


@dataclass(frozen=True, kw_only=True)
class SplitTrainingConfig:
    """Split fine-tuning settings.

    Attributes:
        steps: training steps; batch_size: records per step.
        lr_server: trunk learning rate; lr_client: top, head and calibrator learning rate.
        lora: LoRA settings for the trunk, or ``None`` for full fine-tuning.
        record_rows: rows of the transcript kept (the first steps' rows).
        calib_steps: phase-1 calibration steps on public data (MIXGUARD).
        refit_every, refit_steps: re-fit the calibrator on public data every ``refit_every``
            training steps for ``refit_steps`` steps (the trunk moves while it trains).
        schedule: ``"cosine"`` (both learning rates decay to zero over ``steps``, Loshchilov
            and Hutter, ICLR 2017) or ``"constant"``. The same schedule is used by the
            references (:func:`~trainleak.systems.split_lm.reference.train_reference`), so
            every setting gets the same budget.
    """

    steps: int = param(60, ge=1, integer=True)
    batch_size: int = param(16, ge=2, integer=True)
    lr_server: float = param(1e-3, gt=0)
    lr_client: float = param(3e-3, gt=0)
    lora: LoraSettings | None = None
    record_rows: int = param(256, ge=1, integer=True)
    calib_steps: int = param(150, ge=0, integer=True)
    refit_every: int = param(20, ge=1, integer=True)
    refit_steps: int = param(20, ge=0, integer=True)
    schedule: str = param("cosine", choices=("cosine", "constant"))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class SplitTruth:
    """Ground truth of the recorded rows, for scoring only (never part of the release):
    ``ids`` ``(N, L)`` after decoy insertion and ``real`` ``(N, L)`` the original positions."""

    ids: torch.Tensor
    real: torch.Tensor


@dataclass
class SplitRun:
    """A finished split fine-tuning run: the release, its ground truth, the trained model."""

    transcript: TextSplitTranscript
    truth: SplitTruth
    model: SplitLM
    head: nn.Module
    calibrator: Calibrator | None
    cache: torch.Tensor | None
    spec: TextDefenseSpec
    residuals: list[float]
    losses: list[float]


def schedulers(
    cfg: SplitTrainingConfig, *opts: torch.optim.Optimizer
) -> list[torch.optim.lr_scheduler.LambdaLR]:
    """One scheduler per optimizer for ``cfg.schedule``; step each after its optimizer."""
    steps, cosine = cfg.steps, cfg.schedule == "cosine"

    def factor(t: int) -> float:
        return 0.5 * (1.0 + math.cos(math.pi * min(t, steps) / steps)) if cosine else 1.0

    return [torch.optim.lr_scheduler.LambdaLR(o, factor) for o in opts]


def _pool(final: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    w = real.float().unsqueeze(-1)
    return (final * w).sum(1) / w.sum(1).clamp_min(1.0)


def client_logits(
    run: SplitRun, ids: torch.Tensor, mask: torch.Tensor, aux: torch.Tensor, gen: torch.Generator
) -> torch.Tensor:
    """Class logits for a batch through the whole protocol (fresh secrets)."""
    pool = aux_pool(aux)
    ob = obfuscate(run.spec, ids, mask, run.model.bottom, pool, *_vocab(run.model), gen)
    z = run.model.trunk(ob.hidden, ob.mask)
    zhat = run.calibrator(z, ob, run.cache) if run.calibrator is not None else z
    return run.head(_pool(run.model.top(zhat, ob.top_mask), ob.real))  # type: ignore[no-any-return]


def _vocab(model: SplitLM) -> tuple[int, int]:
    tok = model.lm.tokenizer
    return len(tok), int(tok.pad_token_id)


def _prepare(
    public_lm: LanguageModel,
    split: LMSplit,
    cfg: SplitTrainingConfig,
    n_classes: int,
    seed: int = 0,
) -> tuple[SplitLM, nn.Module, list[nn.Parameter], list[nn.Parameter]]:
    lm = copy.deepcopy(public_lm)
    model = SplitLM(lm, split)
    for p in lm.module.parameters():
        p.requires_grad_(False)
    if cfg.lora is not None:
        targets = model.trunk_module_names()
        add_lora(lm, LoraSettings(r=cfg.lora.r, alpha=cfg.lora.alpha, target_modules=targets))
        server = [p for n, p in lm.module.named_parameters() if "lora_" in n]
    else:
        server = model.part_parameters("trunk")
    top = model.part_parameters("top")
    for p in [*server, *top]:
        p.requires_grad_(True)
    head = seeded_init(nn.Linear(model.width, n_classes), torch.Generator().manual_seed(seed))
    return model, head, server, [*top, *head.parameters()]


def train_split(
    public_lm: LanguageModel,
    split: LMSplit,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    public_ids: torch.Tensor,
    spec: TextDefenseSpec,
    cfg: SplitTrainingConfig,
    seed: int = 0,
) -> SplitRun:
    """Fine-tune ``public_lm`` split at ``split`` on ``data = (ids, mask, labels)`` with the
    client defense ``spec``; ``public_ids`` are the public sequences used as auxiliary samples
    and for calibration.

    Raises:
        ConfigError: a split beyond the model's depth, mismatched data, too few records.
    """
    ids, mask, labels = data
    if not (ids.shape == mask.shape and ids.shape[0] == labels.shape[0] >= cfg.batch_size):
        raise ConfigError("train_split needs ids, mask (n, L) and labels (n,), n >= batch_size")
    gen = torch.Generator().manual_seed(seed)
    model, head, server_p, client_p = _prepare(public_lm, split, cfg, int(labels.max()) + 1, seed)
    calib = (
        Calibrator(model.width, gen, anchor=spec.calibrator) if spec.kind == "mixguard" else None
    )
    client_params = client_p + (list(calib.parameters()) if calib is not None else [])
    s_opt = torch.optim.Adam(server_p, lr=cfg.lr_server)
    c_opt = torch.optim.Adam(client_params, lr=cfg.lr_client)
    scheds = schedulers(cfg, s_opt, c_opt)
    residuals: list[float] = []
    width = max(int(ids.shape[1]), int(public_ids.shape[1])) + spec.n_insert
    pool, cache = aux_pool(public_ids), None
    if calib is not None:
        rho, cache = fit_calibrator(model, calib, spec, public_ids, cfg.calib_steps, gen, width)
        residuals.append(rho)
    rec: dict[str, list[torch.Tensor]] = {k: [] for k in ("h", "m", "gh", "gz", "s", "i", "r")}
    losses = []
    for t in range(cfg.steps):
        idx = torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=gen)
        ob = obfuscate(spec, ids[idx], mask[idx], model.bottom, pool, *_vocab(model), gen)
        loss, sent, got = _step(model, (head, calib, cache), ob, labels[idx], spec, residuals, gen)
        s_opt.zero_grad(set_to_none=True)
        got[0].backward(got[1])
        s_opt.step()
        c_opt.step()
        for sch in scheds:
            sch.step()
        losses.append(loss)
        if sum(len(v) for v in rec["h"]) < cfg.record_rows:
            for k, v in zip(
                ["h", "m", "gh", "gz", "i", "r"],
                (sent, ob.mask, _grad(sent), got[1], ob.ids, ob.real),
                strict=True,
            ):
                rec[k].append(v.detach())
            rec["s"].append(torch.full((len(idx),), t, dtype=torch.long))
        if calib is not None and (t + 1) % cfg.refit_every == 0 and cfg.refit_steps:
            rho, cache = fit_calibrator(model, calib, spec, public_ids, cfg.refit_steps, gen, width)
            residuals.append(rho)
    client = (head, calib, cache)
    return _finish(public_lm, model, client, spec, rec, cfg.record_rows, residuals, losses)


def _grad(t: torch.Tensor) -> torch.Tensor:
    if t.grad is None:  # pragma: no cover - the trunk output always depends on its input
        raise ConfigError("the trunk output does not depend on the hidden states it received")
    return t.grad


def _step(
    model: SplitLM,
    client: tuple[nn.Module, Calibrator | None, torch.Tensor | None],
    ob: Obfuscated,
    y: torch.Tensor,
    spec: TextDefenseSpec,
    residuals: list[float],
    gen: torch.Generator,
) -> tuple[float, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    head, calib, cache = client
    sent = ob.hidden.detach().requires_grad_(True)
    z = model.trunk(sent, ob.mask)  # server
    recv = z.detach().requires_grad_(True)  # client
    zhat = calib(recv, ob, cache) if calib is not None else recv
    logits = head(_pool(model.top(zhat, ob.top_mask), ob.real))
    loss = nn.functional.cross_entropy(logits, y)
    for p in model.part_parameters("top") + list(head.parameters()):
        p.grad = None
    if calib is not None:
        calib.zero_grad(set_to_none=True)
    loss.backward()
    delta = recv.grad
    if delta is None:  # pragma: no cover - the top always depends on the trunk output
        raise ConfigError("the client's loss does not depend on the trunk output")
    if spec.kind == "mixguard" and spec.grad_noise > 0:
        delta = perturb_gradient(delta, residuals[-1], spec.grad_noise, gen)
    return float(loss.detach()), sent, (z, delta)


def _finish(
    public_lm: LanguageModel,
    model: SplitLM,
    client: tuple[nn.Module, Calibrator | None, torch.Tensor | None],
    spec: TextDefenseSpec,
    rec: dict[str, list[torch.Tensor]],
    keep: int,
    residuals: list[float],
    losses: list[float],
) -> SplitRun:
    width = max(int(t.shape[1]) for t in rec["h"])

    def cat(key: str, fill: float | int = 0) -> torch.Tensor:
        parts = []
        for t in rec[key]:
            pad = [0, 0] * (t.ndim - 2) + [0, width - t.shape[1]]
            parts.append(nn.functional.pad(t, pad, value=fill))
        return torch.cat(parts)[:keep]

    pad_id = int(model.lm.tokenizer.pad_token_id)
    transcript = TextSplitTranscript(
        public_lm=public_lm,
        split=model.split,
        smashed=cat("h"),
        mask=cat("m"),
        smashed_grads=cat("gh"),
        body_grads=cat("gz"),
        step=torch.cat(rec["s"])[:keep],
        defense=spec,
    )
    truth = SplitTruth(cat("i", pad_id), cat("r", False))
    model.lm.module.eval()
    head, calib, cache = client
    return SplitRun(transcript, truth, model, head, calib, cache, spec, residuals, losses)


def accuracy(
    run: SplitRun,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    public_ids: torch.Tensor,
    seed: int = 0,
    batch: int = 64,
) -> float:
    """Test accuracy through the split protocol with the run's defense (fresh secrets)."""
    ids, mask, labels = data
    gen = torch.Generator().manual_seed(seed)
    right = 0
    with torch.no_grad():
        for s in range(0, ids.shape[0], batch):
            out = client_logits(run, ids[s : s + batch], mask[s : s + batch], public_ids, gen)
            right += int((out.argmax(1) == labels[s : s + batch]).sum())
    return right / ids.shape[0]
