"""Projected gradient descent (PGD) in an l-infinity ball: the perturbation primitive shared by
adversarial training, anti-adversarial training (AT-AT) and robustness measurements.

References:
    Madry, Makelov, Schmidt, Tsipras and Vladu, "Towards Deep Learning Models Resistant to
    Adversarial Attacks", ICLR 2018.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainleak.validation import check_positive


def pgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float,
    step: float,
    steps: int,
    box: tuple[float, float],
    targeted: bool = False,
    random_start: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """An l-infinity PGD perturbation of ``x`` (detached, inside ``box``).

    Untargeted: ascend the cross-entropy of the true labels ``y``. Targeted: descend the
    cross-entropy of the target labels ``y``. Each step moves by ``step * sign(grad)``, then
    projects onto the ``eps`` ball around ``x`` and clamps to ``box``. The model's parameters
    receive no gradient.

    Args:
        model: the classifier.
        x: clean inputs.
        y: true labels (untargeted) or target labels (targeted).
        eps: radius of the ball (0 returns ``x``).
        step: step size.
        steps: number of steps.
        box: the valid value range ``(low, high)``.
        targeted: steer toward ``y`` instead of away from it.
        random_start: start from a uniform point of the ball.
        generator: the source of the random start.
    """
    check_positive("eps", eps, allow_zero=True)
    check_positive("steps", steps, allow_zero=True)
    lo, hi = box
    x0 = x.detach()
    if eps == 0 or steps == 0:
        return x0.clone()
    adv = x0.clone()
    if random_start:
        dev = generator.device if generator is not None else x0.device
        noise = torch.rand(x0.shape, generator=generator, dtype=x0.dtype, device=dev) * 2 - 1
        noise = noise.to(x0.device)
        adv = (adv + eps * noise).clamp(lo, hi)
    sign = -1.0 if targeted else 1.0
    req = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            adv.requires_grad_(True)
            loss = F.cross_entropy(model(adv), y)
            (grad,) = torch.autograd.grad(loss, adv)
            with torch.no_grad():
                adv = adv + sign * step * grad.sign()
                adv = torch.minimum(torch.maximum(adv, x0 - eps), x0 + eps).clamp(lo, hi)
    finally:
        for p, r in zip(model.parameters(), req):
            p.requires_grad_(r)
    return adv.detach()
