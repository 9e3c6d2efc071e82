"""Gradient matching in embedding space for transformers (TAG / LAMP style baseline).

Free input embeddings ``(B, n, d)`` are optimised with Adam so that the model's gradient at
them matches the released one: ``sum_p (1 - cos(g_p, G_p)) + alpha ||g_p - G_p||^2 /
||G_p||^2`` over the parameters ``p`` (TAG's L2 + L1 mix is replaced by LAMP's cosine + L2).
Encoder labels are optimised jointly as soft labels (DLG); decoder targets are the soft
next tokens ``softmax(x E^T / tau)`` of the embeddings themselves. Every sequence has length
``n`` (no length search) and no language-model prior is used; embeddings are decoded to the
nearest token by cosine and cut at the first end token.

References:
    Deng et al., *TAG: Gradient Attack on Transformer-based Language Models*, EMNLP Findings
    2021; Balunovic, Dimitrov, Jovanovic, Vechev, *LAMP: Extracting Text from Gradients with
    Language Model Priors*, NeurIPS 2022 (cosine + L2 objective in embedding space).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import torch

from trainleak.attacks.base import Attack, Reconstruction, register_attack
from trainleak.attacks.transformer._output import batch_size, pack
from trainleak.progress import Progress
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.transformer_update import TransformerUpdate, end_token
from trainleak.validation import param


@register_attack
@dataclass(frozen=True, kw_only=True)
class GradientMatching(Attack[TransformerUpdate]):
    """TAG/LAMP-style gradient matching over free embeddings (see the module docstring).

    Args:
        steps: Adam steps.
        lr: Adam learning rate.
        l2_weight: weight ``alpha`` of the normalised squared distance next to the cosine.
        temperature: softmax temperature of the decoder's soft targets.
    """

    name: ClassVar[str] = "gradient-matching"
    summary: ClassVar[str] = "TAG/LAMP-style cosine + L2 gradient matching in embedding space"
    release_type: ClassVar[type[TransformerUpdate]] = TransformerUpdate

    steps: int = param(100, ge=1, integer=True)
    lr: float = param(0.05, gt=0)
    l2_weight: float = param(0.1, ge=0)
    temperature: float = param(0.1, gt=0)

    def run(
        self,
        release: TransformerUpdate,
        knowledge: Knowledge,
        generator: torch.Generator,
        progress: Progress | None,
    ) -> Reconstruction:
        batch = batch_size(release, knowledge)
        module = copy.deepcopy(release.model.module).double().eval()
        module.set_attn_implementation("eager")  # type: ignore[operator]  # double backward
        names = [k for k, p in module.named_parameters() if k in release.update and p.requires_grad]
        params: list[torch.Tensor] = [dict(module.named_parameters())[k] for k in names]
        target = [release.update[k].double() for k in names]
        table = module.get_input_embeddings().weight.detach()  # type: ignore[operator]
        n = release.max_length
        x = table[torch.randint(table.shape[0], (batch, n), generator=generator)].clone()
        x.requires_grad_(True)
        labels = torch.zeros(batch, 2, dtype=x.dtype, requires_grad=True)
        opt = torch.optim.Adam([x, labels], lr=self.lr)
        trace = []
        for step in range(self.steps):
            opt.zero_grad()
            loss = self._loss(release, module, params, target, table, x, labels)
            loss.backward()
            opt.step()
            trace.append({"step": float(step), "loss": float(loss.detach())})
        with torch.no_grad():
            unit = table / table.norm(dim=1, keepdim=True)
            ids = (x @ unit.T).argmax(-1)
        end = end_token(release.model.tokenizer, release.kind)
        seqs = []
        for row in ids.tolist():
            cut = row.index(end) + 1 if end in row[1:] else n
            seqs.append(row[:cut])
        pad = release.model.tokenizer.pad_token_id
        out = pack(seqs, batch, n, int(pad if pad is not None else end))
        return Reconstruction(out.inputs, diagnostics=out.diagnostics, trace=trace)

    def _loss(
        self,
        release: TransformerUpdate,
        module: torch.nn.Module,
        params: list[torch.Tensor],
        target: list[torch.Tensor],
        table: torch.Tensor,
        x: torch.Tensor,
        labels: torch.Tensor,
    ) -> torch.Tensor:
        out = module(inputs_embeds=x, attention_mask=torch.ones(x.shape[:2], dtype=torch.long))
        logits = out.logits
        if release.kind == "encoder":
            soft = torch.softmax(labels, -1)
            nll = -(soft * torch.log_softmax(logits[:, : soft.shape[1]], -1)).sum(-1).mean()
        else:
            nxt = torch.softmax(x[:, 1:] @ table.T / self.temperature, -1)
            nll = -(nxt * torch.log_softmax(logits[:, :-1], -1)).sum(-1).mean()
        grads = torch.autograd.grad(nll, params, create_graph=True, allow_unused=True)
        loss = x.new_zeros(())
        for g, t in zip(grads, target, strict=True):
            if g is None:
                continue
            cos = (g * t).sum() / (g.norm() * t.norm()).clamp_min(1e-30)
            l2 = ((g - t) ** 2).sum() / (t**2).sum().clamp_min(1e-30)
            loss = loss + (1 - cos) + self.l2_weight * l2
        return loss

    def expected_shape(
        self, release: TransformerUpdate, knowledge: Knowledge
    ) -> tuple[int, ...] | None:
        return (release.max_length,)
