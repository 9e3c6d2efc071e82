"""Diagnostic: where MIXGUARD's task accuracy goes (issue 13, seed 10). Accuracy only, no
attacks.

Trains the ``split-llm-mixguard`` default world (tiny GPT-2-style model, one-block bottom,
300 steps) with one knob changed at a time and measures accuracy on a VALIDATION set of
fresh records (same generator and pools, a seed the experiment never uses) and on the
experiment's test set. Choices are made on the validation column; the test column is only
reported. The training loop mirrors ``systems.split_lm.train.train_split`` step for step
(same library pieces: ``obfuscate``, ``fit_calibrator``, ``perturb_gradient``) and adds the
knobs:

- ``mixing``: False replaces the mixed, sign-masked hidden states by the clean ones
  (decoys only); the spec's ``n_insert=0`` gives mixing only.
- ``top_mask``: ``"sent"`` (the top attends over every sent position, decoys included) or
  ``"real"`` (the client masks its own decoy positions out of the top's attention; BOS kept).
- ``calib``: ``"joint"`` (the ``unmix`` calibrator trained by the task loss and by the MSE
  re-fits; the library's former default), ``"own-h-residual"`` (the same training, the
  calibrator anchored at the client's own clean state: the library's ``anchored`` default),
  ``"mse"`` (MSE re-fits only), ``"task"`` (phase-1 MSE fit, then the task loss only),
  ``"oracle"`` (DIAGNOSTIC CEILING, not a defense: the top is fed the true ``S(h)``, the
  trunk's output on the client's clean hidden states, which the client could never have;
  the gradient returned to the server is the one a perfect linear calibrator would pass back),
  ``"own-h"`` (the top on the client's own bottom output, no server: the client alone).
- ``lr_top``, ``warmup``: the client's learning rate and a linear warm-up.
- ``eval``: ``"defended"`` (fresh secrets, as the experiment measures) or ``"clean"``
  (DIAGNOSTIC: no defense at inference, which would send the test records in the clear).

Usage:
    python benchmarks/split_llm_utility.py [--variants NAME ...] [--seeds 0 1 2] [--steps 300]
    python benchmarks/split_llm_utility.py --render     # rewrite the .md from the JSON

Appends its rows to ``benchmarks/results/split_llm_utility.json`` and rewrites ``.md``. The base
budget is 300 training steps (the experiment's default when these rows were measured; it is
900 now), variants named ``-steps-N`` train N; the calibrator re-fits every 37 steps either way.
MIXGUARD's private weight is 0.6-0.8, the experiment's default when the rows were measured
(0.2-0.4 now).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainleak.data.records import make_records, slot_pools
from trainleak.defenses.split_text import Calibrator, Obfuscated, obfuscate, perturb_gradient
from trainleak.experiments.split_llm_mixguard import settings, training_config, world
from trainleak.experiments.split_llm_mixguard_claims import SplitLLMMixGuardConfig
from trainleak.models.split_lm import LMSplit
from trainleak.releases.split_text import TextDefenseSpec
from trainleak.scenarios.split_llm import World, encode_records
from trainleak.systems.split_lm import SplitTrainingConfig, aux_pool, fit_calibrator
from trainleak.systems.split_lm.train import _pool, _prepare, _vocab

OUT = Path(__file__).resolve().parent / "results"
Data = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Knobs:
    spec: str = "mixguard"  # a setting name of the experiment
    spec_change: tuple[tuple[str, Any], ...] = ()
    mixing: bool = True
    top_mask: str = "sent"
    calib: str = "joint"
    lr_top: float | None = None
    warmup: int = 0
    steps: int | None = None
    eval: str = "defended"
    lr_server: float | None = None


VARIANTS: dict[str, Knobs] = {
    "none": Knobs(spec="none"),
    "noise-0.5": Knobs(spec="noise-0.5"),
    "mixguard": Knobs(),
    "decoys-only": Knobs(mixing=False),
    "mixing-only": Knobs(spec_change=(("n_insert", 0),)),
    "no-signs": Knobs(spec_change=(("signs", False),)),
    "no-grad-noise": Knobs(spec_change=(("grad_noise", 0.0),)),
    "oracle-calib": Knobs(calib="oracle"),
    "top-mask-real": Knobs(top_mask="real"),
    "calib-mse-only": Knobs(calib="mse"),
    "calib-task-only": Knobs(calib="task"),
    "lr-top-1e-3": Knobs(lr_top=1e-3),
    "warmup-50": Knobs(warmup=50),
    "clean-eval": Knobs(eval="clean"),
    "own-h": Knobs(calib="own-h"),
    "none-trunk-frozen": Knobs(spec="none", lr_server=1e-9),
    "mask-real+mse": Knobs(top_mask="real", calib="mse"),
    "mask-real+mse+warmup": Knobs(top_mask="real", calib="mse", warmup=50),
    "mask-real+no-signs": Knobs(top_mask="real", spec_change=(("signs", False),)),
    "mask-real+mse+no-signs": Knobs(top_mask="real", calib="mse", spec_change=(("signs", False),)),
    "oracle+mask-real": Knobs(calib="oracle", top_mask="real"),
    "decoys-only+mask-real": Knobs(mixing=False, top_mask="real"),
    "own-h+mask-real": Knobs(calib="own-h", top_mask="real"),
    "decoys-only-no-grad-noise": Knobs(mixing=False, spec_change=(("grad_noise", 0.0),)),
    "own-h-residual": Knobs(calib="own-h-residual"),
    "own-h-residual-mask-real": Knobs(calib="own-h-residual", top_mask="real"),
    "noise-0.5-clean-eval": Knobs(spec="noise-0.5", eval="clean"),
    "mixguard-r2": Knobs(spec_change=(("n_insert", 2),)),
    "mixguard-r0": Knobs(spec_change=(("n_insert", 0),)),
    "mixguard-steps-900": Knobs(steps=900),
    "decoys-only-steps-900": Knobs(mixing=False, steps=900),
    "own-h-residual-mask-real-steps-900": Knobs(calib="own-h-residual", top_mask="real", steps=900),
    "own-h+mask-real-steps-900": Knobs(calib="own-h", top_mask="real", steps=900),
    "top-mask-real-steps-900": Knobs(top_mask="real", steps=900),
    "none-steps-900": Knobs(spec="none", steps=900),
    "mixguard-steps-1500": Knobs(steps=1500),
    "noise-0.5-steps-900": Knobs(spec="noise-0.5", steps=900),
    "own-h-residual-mask-real-steps-600": Knobs(calib="own-h-residual", top_mask="real", steps=600),
    "own-h+mask-real-steps-600": Knobs(calib="own-h", top_mask="real", steps=600),
}


def validation_set(cfg: SplitLLMMixGuardConfig, w: World, n: int = 300) -> Data:
    """Fresh records from the same generator and pools (seed ``cfg.seed + 7``, used nowhere
    else): the development split on which variants are compared."""
    pools = slot_pools(cfg.pool_size, cfg.seed)
    return encode_records(w.lm, make_records(n, pools, seed=cfg.seed + 7), cfg.length)


def top_mask(ob: Obfuscated, how: str) -> torch.Tensor:
    return ob.mask if how == "sent" else ob.top_mask


class Variant:
    """One split training run with the knobs (see the module docstring)."""

    def __init__(
        self,
        w: World,
        split: LMSplit,
        spec: TextDefenseSpec,
        tcfg: SplitTrainingConfig,
        k: Knobs,
        seed: int,
    ) -> None:
        self.w, self.spec, self.tcfg, self.k = w, spec, tcfg, k
        self.gen = torch.Generator().manual_seed(seed)
        labels = w.train[2]
        self.model, self.head, server_p, client_p = _prepare(
            w.lm, split, tcfg, int(labels.max()) + 1, seed
        )
        use_calib = spec.kind == "mixguard" and k.mixing and k.calib not in ("oracle", "own-h")
        self.calib: Calibrator | None = None
        if use_calib:
            anchor = "anchored" if k.calib == "own-h-residual" else "unmix"
            self.calib = Calibrator(self.model.width, self.gen, anchor=anchor)
        client = list(client_p)
        if self.calib is not None and k.calib in ("joint", "task", "own-h-residual"):
            client += list(self.calib.parameters())
        self.s_opt = torch.optim.Adam(server_p, lr=k.lr_server or tcfg.lr_server)
        lr = k.lr_top or tcfg.lr_client
        self.c_opt = torch.optim.Adam(client, lr=lr)
        self.c_lr = lr
        self.pool = aux_pool(w.public_ids)
        self.width = max(int(w.train[0].shape[1]), int(w.public_ids.shape[1])) + spec.n_insert
        self.cache: torch.Tensor | None = None
        self.rho = [0.0]
        if self.calib is not None:
            rho, self.cache = self._fit(tcfg.calib_steps)
            self.rho = [rho]

    def _fit(self, steps: int) -> tuple[float, torch.Tensor]:
        assert self.calib is not None
        return fit_calibrator(
            self.model, self.calib, self.spec, self.w.public_ids, steps, self.gen, self.width
        )

    def _ob(self, ids: torch.Tensor, mask: torch.Tensor, spec: TextDefenseSpec) -> Obfuscated:
        ob = obfuscate(spec, ids, mask, self.model.bottom, self.pool, *_vocab(self.model), self.gen)
        if not self.k.mixing and spec.kind == "mixguard":
            with torch.no_grad():
                h = self.model.bottom(ob.ids, ob.mask)
            one = torch.ones(h.shape[-1])
            ob = Obfuscated(h, ob.ids, ob.mask, ob.real, one[None], one, ob.aux_rows[:0], ob.clean)
        return ob

    def _top_in(self, z: torch.Tensor, ob: Obfuscated) -> torch.Tensor:
        if self.k.calib == "own-h":  # diagnostic: the top on the client's own h, no server
            with torch.no_grad():
                return self.model.bottom(ob.ids, ob.mask)
        if self.k.calib == "oracle" and self.spec.kind == "mixguard" and self.k.mixing:
            with torch.no_grad():
                return self.model.trunk(self.model.bottom(ob.ids, ob.mask), ob.mask)
        if self.calib is not None:
            return self.calib(z, ob, self.cache)
        return z

    def train(self) -> list[float]:
        ids, mask, labels = self.w.train
        steps = self.k.steps or self.tcfg.steps
        losses = []
        for t in range(steps):
            if self.k.warmup:
                for g in self.c_opt.param_groups:
                    g["lr"] = self.c_lr * min(1.0, (t + 1) / self.k.warmup)
            idx = torch.randint(0, ids.shape[0], (self.tcfg.batch_size,), generator=self.gen)
            ob = self._ob(ids[idx], mask[idx], self.spec)
            sent = ob.hidden.detach().requires_grad_(True)
            z = self.model.trunk(sent, ob.mask)
            recv = z.detach().requires_grad_(True)
            oracle = self.k.calib == "oracle" and self.spec.kind == "mixguard" and self.k.mixing
            zin = self._top_in(recv, ob)
            if oracle:
                zin = zin.clone().requires_grad_(True)
            logits = self.head(_pool(self.model.top(zin, top_mask(ob, self.k.top_mask)), ob.real))
            loss = nn.functional.cross_entropy(logits, labels[idx])
            self.c_opt.zero_grad(set_to_none=True)
            if self.calib is not None:
                self.calib.zero_grad(set_to_none=True)
            loss.backward()
            if oracle:
                assert zin.grad is not None
                delta = zin.grad * ob.signs / ob.lam0  # a perfect linear un-mixing's Jacobian
            else:  # own-h: the top ignores the server, which gets a zero gradient
                delta = recv.grad if recv.grad is not None else torch.zeros_like(recv)
            if self.spec.kind == "mixguard" and self.spec.grad_noise > 0:
                delta = perturb_gradient(
                    delta, self.rho[-1] or 0.25, self.spec.grad_noise, self.gen
                )
            self.s_opt.zero_grad(set_to_none=True)
            z.backward(delta)
            self.s_opt.step()
            self.c_opt.step()
            losses.append(float(loss.detach()))
            refit = (t + 1) % self.tcfg.refit_every == 0 and self.tcfg.refit_steps
            if self.calib is not None and refit and self.k.calib != "task":
                rho, self.cache = self._fit(self.tcfg.refit_steps)
                self.rho.append(rho)
            elif self.calib is not None and refit:  # task-only: refresh the cache, no MSE fit
                rho, self.cache = self._fit(0)
                self.rho.append(rho)
        return losses

    def accuracy(self, data: Data, seed: int, batch: int = 64) -> float:
        ids, mask, labels = data
        self.gen = torch.Generator().manual_seed(seed)
        spec = TextDefenseSpec() if self.k.eval == "clean" else self.spec
        right = 0
        self.confusion = torch.zeros((8, 8), dtype=torch.long)
        self.model.lm.module.eval()
        with torch.no_grad():
            for s in range(0, ids.shape[0], batch):
                ob = self._ob(ids[s : s + batch], mask[s : s + batch], spec)
                z = self.model.trunk(ob.hidden, ob.mask)
                zin = z if self.k.eval == "clean" else self._top_in(z, ob)
                out = self.head(_pool(self.model.top(zin, top_mask(ob, self.k.top_mask)), ob.real))
                right += int((out.argmax(1) == labels[s : s + batch]).sum())
                for a, b in zip(
                    labels[s : s + batch].tolist(), out.argmax(1).tolist(), strict=True
                ):
                    self.confusion[a, b] += 1
        return right / ids.shape[0]


def run_variant(
    name: str, cfg: SplitLLMMixGuardConfig, w: World, val: Data, seed: int
) -> dict[str, Any]:
    k = VARIANTS[name]
    tcfg = training_config(cfg)
    spec = dataclasses.replace(settings(cfg)[k.spec], **dict(k.spec_change))
    start = time.perf_counter()
    torch.manual_seed(seed)
    v = Variant(w, LMSplit(cfg.bottom_end, cfg.top_start), spec, tcfg, k, seed)
    losses = v.train()
    val_acc = v.accuracy(val, seed + 2)
    test_acc = v.accuracy(w.test, seed + 1)
    conf = v.confusion
    pair_ok = sum(int(conf[a, (a // 2) * 2 : (a // 2) * 2 + 2].sum()) for a in range(8))
    return {
        "variant": name,
        "seed": seed,
        "knobs": dataclasses.asdict(k),
        "val_accuracy": val_acc,
        "test_accuracy": test_acc,
        "final_loss": sum(losses[-30:]) / 30,
        "test_pair_accuracy": pair_ok / int(conf.sum()),
        "test_within_pair": [
            int(conf[2 * p + i, 2 * p + i].sum())
            / max(1, int(conf[2 * p + i, 2 * p : 2 * p + 2].sum()))
            for p in range(4)
            for i in range(2)
        ],
        "rho_last": v.rho[-1],
        "seconds": time.perf_counter() - start,
        "load": Path("/proc/loadavg").read_text().split()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--world-seed", type=int, default=0)
    ap.add_argument("--out", default="split_llm_utility")
    ap.add_argument("--steps", type=int, default=300, help="base training steps")
    ap.add_argument("--render", action="store_true", help="only rewrite the markdown")
    args = ap.parse_args()
    path = OUT / f"{args.out}.json"
    if args.render:
        render(path)
        return
    torch.set_num_threads(1)
    # the rows were measured at the private weight 0.6-0.8, the experiment's default then
    over = {"steps": args.steps, "lam0_low": 0.6, "lam0_high": 0.8}
    cfg = SplitLLMMixGuardConfig(seed=args.world_seed, **over)
    w = world(cfg)
    val = validation_set(cfg, w)
    rows: list[dict[str, Any]] = json.loads(path.read_text())["rows"] if path.exists() else []
    for seed in args.seeds:
        for name in args.variants:
            r = run_variant(name, cfg, w, val, seed)
            r["world_seed"] = args.world_seed
            rows.append(r)
            print(json.dumps(r), flush=True)
            meta = {"machine": platform.platform(), "rows": rows}
            path.write_text(json.dumps(meta, indent=1))
    render(path)


def render(path: Path) -> None:
    """Validation / test accuracy per variant and seed (first run of each pair), as markdown."""
    rows = json.loads(path.read_text())["rows"]
    seeds = sorted({r["seed"] for r in rows})
    cells: dict[str, dict[int, str]] = {}
    for r in rows:
        cell = f"{r['val_accuracy']:.3f} / {r['test_accuracy']:.3f}"
        cells.setdefault(r["variant"], {}).setdefault(r["seed"], cell)
    lines = [
        "# MIXGUARD utility diagnostic (issue 13)",
        "",
        "`python benchmarks/split_llm_utility.py`: the `split-llm-mixguard` world, one knob at a",
        "time (knobs in the script's docstring), accuracy only. Cells: validation / test accuracy",
        "(validation: 300 fresh records, generator seed never used by the experiment). Base",
        "budget 300 steps; `-steps-N` variants train N. `own-h-residual` is the library's",
        "`anchored` calibrator; `own-h` is the client alone (no server); `none` no defense.",
        "",
        "| variant | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|" + "---|" * len(seeds),
    ]
    for name, by_seed in cells.items():
        lines.append(f"| {name} | " + " | ".join(by_seed.get(s, "") for s in seeds) + " |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
