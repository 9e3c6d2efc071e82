"""Benchmark the linear-release attacks against baselines run side by side (seeds 6, 7, 16).

Writes ``benchmarks/results/linear_release.json`` and ``.md``. Run:
``TRAINLEAK_DATA=../shared/data .venv/bin/python benchmarks/linear_release.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

from trainleak.attacks.collaboration.collusion import AnchorInversionAttack
from trainleak.linalg import haar_orthogonal
from trainleak.metrics.collaboration import linkage_rate
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.deletion import rr_transcript_rates
from trainleak.scenarios.unlearning import ProtocolSetting, run_protocol
from trainleak.systems.collaboration import DCParty, collaborate
from trainleak.systems.collaboration.data import random_anchor, synthetic_faces


def broadcast() -> dict[str, float]:
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    p = np.random.default_rng(0).permutation(len(y))
    h, o, r = p[:1000], p[1000:1300], p[1300:]
    t = time.perf_counter()
    out = run_protocol(ProtocolSetting((x[h], y[h]), (x[o], y[o]), (x[r], y[r]), deletions=20))
    secs = time.perf_counter() - t
    # baseline: the majority class, and the honest mean feature of that class as the guess
    maj = int(np.bincount(y[h]).argmax())
    mean = x[h][y[h] == maj].mean(0)
    gone = x[h][:20]
    cos = np.abs(gone @ mean) / (np.linalg.norm(gone, axis=1) * np.linalg.norm(mean) + 1e-12)
    return {
        "attack_label_acc": out.label_accuracy,
        "attack_cos": float(out.cosine.mean()),
        "baseline_label_acc": float(np.bincount(y[h]).max() / len(h)),
        "baseline_cos": float(cos.mean()),
        "seconds_20_deletions": secs,
    }


def deletion() -> dict[str, float]:
    bits = np.random.default_rng(0).integers(0, 2, 10_000)
    t = time.perf_counter()
    fresh, single = rr_transcript_rates(bits, 1.0, "fresh", [51, 0])
    return {
        "majority_vote_k51": fresh,
        "single_release": single,
        "ratio": fresh / single,
        "seconds": time.perf_counter() - t,
    }


def collaboration() -> dict[str, float]:
    X, ids, attr = synthetic_faces(200, 10, 32, seed=0)
    owner = np.random.default_rng(0).integers(0, 4, len(ids))
    ps = [DCParty(X[owner == k], attr[owner == k], seed=k) for k in range(4)]
    anchor = random_anchor(X, 64, 1)
    kn = Knowledge(disclosures=(ps[0].disclose(0, anchor),))
    target = np.concatenate([np.flatnonzero(owner == k) for k in range(1, 4)])
    t = time.perf_counter()
    rec = AnchorInversionAttack()(collaborate(ps, anchor), kn).inputs.numpy()
    secs = time.perf_counter() - t
    rng = np.random.default_rng(2)
    guess = np.concatenate(
        [(ps[k].transform(ps[k].X) - ps[k].t) @ haar_orthogonal(32, rng) for k in range(1, 4)]
    )
    return {
        "attack_linkage": linkage_rate(rec, ids[target], X, ids),
        "random_rotation_linkage": linkage_rate(guess, ids[target], X, ids),
        "seconds": secs,
    }


def main() -> None:
    torch.set_num_threads(1)
    res = {"broadcast": broadcast(), "deletion": deletion(), "collaboration": collaboration()}
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "linear_release.json").write_text(json.dumps(res, indent=2))
    b, d, c = res["broadcast"], res["deletion"], res["collaboration"]
    rows = [
        ("seed 6 broadcast (digits, fp64)", "label acc", b["attack_label_acc"],
         b["baseline_label_acc"], "majority class"),
        ("seed 6 broadcast (digits, fp64)", "feature cosine", b["attack_cos"], b["baseline_cos"],
         "class mean"),
        ("seed 16 deletion (eps=1, k=51)", "bits recovered", d["majority_vote_k51"],
         d["single_release"], "one release"),
        ("seed 7 collusion (synthetic, noiseless)", "identity linkage", c["attack_linkage"],
         c["random_rotation_linkage"], "random rotation"),
    ]  # fmt: skip
    lines = ["| system | metric | attack | baseline | ratio |", "|---|---|---|---|---|"]
    for system, metric, att, base, name in rows:
        ratio = att / max(base, 1e-9)
        lines.append(f"| {system} | {metric} | {att:.4f} | {base:.4f} ({name}) | {ratio:.2f} |")
    (out / "linear_release.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
