"""Benchmark helper: the erasure attacks' results on the FedSGD benchmark's batches, dumped by
one version of the library and compared with another's (same samples, labels, certificates).

Speed changes to the decoder and the certificate must not change what is recovered or
certified. Run the dump once per version (``PYTHONPATH`` pointing at each version's sources),
then compare; the comparison regenerates the true batches and scores both:

``PYTHONPATH=<old>/src python benchmarks/erasure_equivalence.py dump /tmp/old.pt``
``PYTHONPATH=src python benchmarks/erasure_equivalence.py dump /tmp/new.pt``
``PYTHONPATH=src python benchmarks/erasure_equivalence.py compare /tmp/old.pt /tmp/new.pt``

Cases: the active cells of ``fedsgd_recovery.py`` (2B neurons, 3 groups, B 16-512, seeds 0-2),
its fixed-neuron cells (B = 128; 128, 256, 1024 neurons) and passive cells (784-1024-10 MLP,
0 and 100 SGD steps, B 8-128, seeds 0-1).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch

from trainleak.attacks.gradient.erasure import ErasureDecodingActive, ErasureDecodingPassive
from trainleak.releases import Knowledge
from trainleak.scenarios.federated import trained_mlp
from trainleak.systems.federated import fedsgd_update
from trainleak.systems.federated.data import Pool, load_pool
from trainleak.systems.federated.design import choose_groups
from trainleak.systems.federated.malicious import malicious_mlp


def _batch(pool: Pool, key: str) -> tuple[torch.Tensor, torch.Tensor]:
    kind, a, b, t = key.split(":")
    size = int(b) if kind != "fixed" else 128
    gen = torch.Generator().manual_seed(int(t) * 7919 + size + (kind == "passive"))
    x, y = pool.batch(size, gen)
    return x.double(), y


def _cases() -> list[str]:
    keys = [f"active:{2 * b}:{b}:{t}" for b in (16, 64, 128, 256, 512) for t in range(3)]
    keys += [f"fixed:{m}:128:{t}" for m in (128, 256, 1024) for t in range(3)]
    keys += [f"passive:{s}:{b}:{t}" for s in (0, 100) for b in (8, 16, 32, 64, 128) for t in (0, 1)]
    return keys


def dump(path: str) -> None:
    """Run every case and save the reconstructions."""
    torch.set_num_threads(1)
    pool = load_pool("mnist", n_public=1000)
    out: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for key in _cases():
        kind, a, b, t = key.split(":")
        x, y = _batch(pool, key)
        if kind == "passive":
            if a not in models:
                models[a] = trained_mlp(pool, width=1024, steps=int(a))
            spec, params = models[a]
            kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0))
            rec = ErasureDecodingPassive()(fedsgd_update(spec, params, x, y), kn, seed=int(t))
        else:
            groups = 3 if kind == "active" else choose_groups(128, int(a))
            spec, params = malicious_mlp(
                pool.input_shape, pool.n_classes, pool.public_x, n_groups=groups,
                bins_per_group=math.ceil(int(a) / groups), hidden=32, seed=int(t),
            )  # fmt: skip
            kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0), active=True)
            rec = ErasureDecodingActive()(fedsgd_update(spec, params, x, y), kn, seed=int(t))
        n = int(rec.diagnostics["n_decoded"])
        out[key] = {
            "x": rec.inputs[:n].reshape(n, -1),
            "labels": rec.labels[:n],
            "certified": rec.certified[:n],
            "bounds": torch.tensor(rec.diagnostics["error_bounds"], dtype=torch.float64),
            "reason": rec.diagnostics["certificate_reason"],
        }
        print(key, n, int(rec.certified.sum()), f"{rec.seconds:.2f} s", flush=True)
    torch.save(out, path)


def _exact(rec: dict[str, Any], x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    """Exact rate against the true batch, and false certificates."""
    if rec["x"].shape[0] == 0:
        return 0.0, 0
    same = y.unsqueeze(1) == rec["labels"].unsqueeze(0)
    dist = torch.where(same, torch.cdist(x, rec["x"], p=math.inf), math.inf)
    false = int((rec["certified"] & ~(dist.min(0).values <= 1e-6)).sum())
    return float((dist.min(1).values <= 1e-6).double().mean()), false


def compare(old_path: str, new_path: str) -> None:
    """Print per case whether the two dumps agree, and a summary line."""
    pool = load_pool("mnist", n_public=1000)
    old = torch.load(old_path, weights_only=True)
    new = torch.load(new_path, weights_only=True)
    agree, worst_dx = 0, 0.0
    for key in _cases():
        a, b = old[key], new[key]
        x, y = _batch(pool, key)
        x = x.reshape(x.shape[0], -1)
        oa, ob = torch.argsort(a["x"].sum(1)), torch.argsort(b["x"].sum(1))
        same_n = a["x"].shape == b["x"].shape
        dx = float((a["x"][oa] - b["x"][ob]).abs().max()) if same_n and a["x"].numel() else 0.0
        ok = (
            same_n
            and dx <= 1e-9
            and torch.equal(a["labels"][oa], b["labels"][ob])
            and torch.equal(a["certified"][oa], b["certified"][ob])
            and a["reason"].split(":")[0] == b["reason"].split(":")[0]
            and _exact(a, x, y) == _exact(b, x, y)
        )
        agree += ok
        worst_dx = max(worst_dx, dx if same_n else math.inf)
        print(key, "same" if ok else "DIFFERENT", f"dx={dx:.1e}", _exact(a, x, y), _exact(b, x, y))
    print(f"{agree} of {len(_cases())} cases agree; largest input difference {worst_dx:.1e}")


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3])
