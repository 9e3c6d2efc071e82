"""Causal-LM fine-tuning, full or with LoRA adapters (Hu et al. 2022, via ``peft``), seeded.

LoRA adapters are merged into the weights when training ends, so the result is again a plain
transformers model that saves and scores like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from peft import LoraConfig, get_peft_model
from torch import nn

from trainleak.errors import ConfigError
from trainleak.models.language.core import LanguageModel
from trainleak.models.language.text import encode
from trainleak.progress import Progress, report_every
from trainleak.validation import check_fields, param

LORA_TARGETS = {
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "llama": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    "bert": ("query", "key", "value", "dense"),
}


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings.

    Attributes:
        r: adapter rank.
        alpha: scaling numerator (the update is scaled by ``alpha / r``).
        target_modules: names of the linear layers to adapt; ``None`` picks every attention and
            MLP projection of the model's family.
    """

    r: int = param(8, ge=1)
    alpha: int = param(16, ge=1)
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_fields(self)


def add_lora(lm: LanguageModel, lora: LoraSettings) -> nn.Module:
    """Wrap ``lm.module`` with trainable LoRA adapters (the base weights frozen); returns the
    peft model, whose ``merge_and_unload()`` gives the merged transformers model back."""
    targets = lora.target_modules or LORA_TARGETS.get(lm.spec.family)
    if not targets:
        raise ConfigError(
            f"no default LoRA targets for family {lm.spec.family!r}; "
            "set LoraSettings.target_modules"
        )
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        target_modules=list(targets),
        lora_dropout=0.0,
        bias="none",
        fan_in_fan_out=lm.spec.family == "gpt2",
    )
    return get_peft_model(lm.module, config)


def causal_loss(module: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over real tokens."""
    logits = module(input_ids=ids, attention_mask=mask).logits[:, :-1]
    target = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=-100
    )


def fine_tune(
    lm: LanguageModel,
    texts: Sequence[str],
    steps: int,
    lr: float,
    batch_size: int,
    lora: LoraSettings | None = None,
    seed: int = 0,
    *,
    max_length: int | None = None,
    progress: Progress | None = None,
) -> list[float]:
    """Fine-tune causal ``lm`` in place on ``texts`` for ``steps`` AdamW steps of ``batch_size``
    texts drawn in seeded epochs; with ``lora``, train adapters and merge them at the end.

    Returns:
        the training loss at every step.
    """
    if lm.kind != "causal":
        raise ConfigError(f"fine_tune trains causal language models; {lm.name} is an encoder")
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        if not isinstance(v, int) or v < 1:
            raise ConfigError.invalid(name, "a positive integer", v)
    if not lr > 0:
        raise ConfigError.invalid("lr", "a number > 0", lr)
    enc = encode(lm, texts, max_length or lm.spec.max_length)
    model = add_lora(lm, lora) if lora is not None else lm.module
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(texts), generator=gen)
    losses: list[float] = []
    cursor = 0
    model.train()
    for step in range(steps):
        if cursor + batch_size > len(order):
            order, cursor = torch.randperm(len(texts), generator=gen), 0
        idx = order[cursor : cursor + batch_size]
        cursor += batch_size
        loss = causal_loss(model, enc.input_ids[idx], enc.attention_mask[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        report_every(progress, "fine-tune", step + 1, steps, k=10)
    model.eval()
    if lora is not None:
        lm.module = model.merge_and_unload()  # type: ignore[operator]
    return losses
