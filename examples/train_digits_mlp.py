"""Train a small network with plain PyTorch, save it as you would any model, then audit it.

Nothing here imports trainleak: this is the code of someone who trained a model and now wants
to know what its weights give away. It trains a one-hidden-layer ReLU network without biases
(a homogeneous network, the kind whose weights the KKT attack of Haim et al. 2022 reads) to
tell odd from even digits on 100 of scikit-learn's bundled 8x8 digits, by full-batch gradient
descent on the logistic loss, and writes to ``--out``:

* ``weights.safetensors`` (``model.state_dict()``, keys ``0.weight`` and ``2.weight``) and
  ``release.json``, the model spec trainleak reads;
* ``knowledge.yaml``: what an adversary is assumed to know (the pixel range, the labels);
* ``private.safetensors``: the 100 training images, used by ``--private`` to score the
  reconstructions (never shown to an attack);
* ``public.safetensors``: 200 other digits, a public sample an adversary could hold.

Then::

    python examples/train_digits_mlp.py --out runs/own-model
    trainleak assess --release runs/own-model/release.json \\
        --knowledge runs/own-model/knowledge.yaml \\
        --private runs/own-model/private.safetensors --out runs/own-model/assessment
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from sklearn.datasets import load_digits
from torch import nn

HIDDEN = 1000
INIT_SCALE = 0.03  # small initial weights: training then maximises the margin (rich regime)


def data(per_class: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``per_class`` odd and even digits for training, 200 other digits as a public sample."""
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)  # pixels in [0, 1]
    y = torch.tensor(y)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    odd = perm[(y[perm] % 2) == 1][:per_class]
    even = perm[(y[perm] % 2) == 0][:per_class]
    train = torch.cat([odd, even])
    rest = perm[~torch.isin(perm, train)][:200]
    return x[train], (y[train] % 2).float(), x[rest]


def train(x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> nn.Sequential:
    """Full-batch gradient descent on the logistic loss, from a small initialisation."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, HIDDEN, bias=False), nn.ReLU(), nn.Linear(HIDDEN, 1, bias=False)
    )
    with torch.no_grad():
        for layer in (model[0], model[2]):
            layer.weight.normal_(0.0, INIT_SCALE * math.sqrt(2.0 / layer.in_features))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    signs = 2 * y - 1
    for step in range(steps + 1):
        margins = model(x).squeeze(1) * signs
        loss = F.softplus(-margins).mean()
        if step % max(1, steps // 5) == 0:
            print(f"step {step:6d}  loss {loss.item():.3g}  min margin {margins.min().item():.3g}")
        if step == steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def save(
    model: nn.Sequential,
    x: torch.Tensor,
    y: torch.Tensor,
    public: torch.Tensor,
    out: Path,
    steps: int,
    lr: float,
) -> None:
    """The release (weights + spec), the adversary's knowledge, the reference set."""
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.contiguous() for k, v in model.state_dict().items()}  # "0.weight", "2.weight"
    save_file(weights, str(out / "weights.safetensors"))
    spec = {
        "type": "checkpoint",
        "description": "odd/even digits, 64-1000-1 ReLU network without biases, plain PyTorch",
        "architecture": {
            "kind": "homogeneous_mlp",
            "kwargs": {"input_shape": [1, 8, 8], "hidden": [HIDDEN], "out_dim": 1,
                       "init_scale": INIT_SCALE},
        },
        "weights": "weights.safetensors",
        "tensor_names": {"layers.0.weight": "0.weight", "layers.1.weight": "2.weight"},
        "dtype": "float32",
        "optimizer": {"name": "gd", "lr": lr},
        "training": {"loss": "logistic", "steps": steps, "n_train": len(x)},
    }  # fmt: skip
    (out / "release.json").write_text(json.dumps(spec, indent=2) + "\n")
    (out / "knowledge.yaml").write_text(
        "# what the adversary is assumed to know besides the weights\n"
        "value_range: [0.0, 1.0]   # pixel range\n"
        "label_set: [0, 1]         # odd / even\n"
        "prior: public.safetensors # 200 public digits (also the baseline's candidates)\n"
    )
    save_file({"x": public.reshape(-1, 1, 8, 8).contiguous()}, str(out / "public.safetensors"))
    private = {"x": x.reshape(-1, 1, 8, 8).contiguous(), "y": y.long()}
    save_file(private, str(out / "private.safetensors"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/own-model"))
    parser.add_argument("--per-class", type=int, default=10, help="training digits per label")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=0.5)
    args = parser.parse_args()
    x, y, public = data(args.per_class)
    start = time.perf_counter()
    model = train(x, y, args.steps, args.lr)
    print(f"trained in {time.perf_counter() - start:.0f} s")
    save(model, x, y, public, args.out, args.steps, args.lr)
    print(f"release: {args.out / 'release.json'}")


if __name__ == "__main__":
    main()
