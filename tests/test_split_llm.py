"""Three-way split of a causal LM, the text transcript, the records corpus, the defenses
(MIXGUARD's calibration) and the attacks, on a tiny model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from conftest import require_module

require_module("transformers", "pip install 'trainleak[text]'")
require_module("faker", "pip install 'trainleak[text]'")

from split_llm_fixtures import MIXGUARD, SPLIT, tiny_run, tiny_text_transcript, tiny_world  # noqa: E402
from trainleak.attacks.split_lm import AdaptiveInverter, BiSRRefinement, LearnedInverter  # noqa: E402
from trainleak.attacks.split_lm._common import features  # noqa: E402
from trainleak.data.records import SLOTS, TEMPLATES, make_records, slot_pools  # noqa: E402
from trainleak.defenses.split_text import (  # noqa: E402
    Calibrator,
    insert_decoys,
    mixing_weights,
    obfuscate,
)
from trainleak.errors import ConfigError, ShapeError  # noqa: E402
from trainleak.metrics.split_text import positional_prior, rouge_l, token_recovery  # noqa: E402
from trainleak.models.language import LoraSettings  # noqa: E402
from trainleak.models.split_lm import LMSplit, SplitLM  # noqa: E402
from trainleak.releases.split_text import TextDefenseSpec, TextSplitTranscript  # noqa: E402
from trainleak.scenarios.split_llm import attack_run, baseline_score  # noqa: E402
from trainleak.systems.split_lm import (  # noqa: E402
    SplitTrainingConfig,
    fit_calibrator,
    probe_residual,
    train_split,
)
from trainleak.systems.split_lm.train import schedulers  # noqa: E402


def test_parts_compose_to_the_full_model() -> None:
    w = tiny_world()
    m = SplitLM(w.lm, SPLIT)
    ids, mask = w.test[0][:4], w.test[1][:4]
    with torch.no_grad():
        parts = m.top(m.trunk(m.bottom(ids, mask), mask), mask)
        full = m.full(ids, mask)
    keep = mask.bool()
    assert torch.allclose(parts[keep], full[keep], atol=1e-5)
    # the trunk really depends on what it receives
    with torch.no_grad():
        h = m.bottom(ids, mask)
        assert not torch.allclose(m.trunk(h, mask), m.trunk(h + 1.0, mask))


@pytest.mark.parametrize("bottom_end, top_start", [(0, 2), (2, 2), (1, 4), (3, 9)])
def test_split_beyond_depth_is_refused(bottom_end: int, top_start: int) -> None:
    with pytest.raises(ConfigError, match="beyond the model's depth"):
        SplitLM(tiny_world().lm, LMSplit(bottom_end, top_start))


def test_bad_hidden_states_are_refused() -> None:
    w = tiny_world()
    m = SplitLM(w.lm, SPLIT)
    mask = w.test[1][:2]
    good = torch.zeros((*mask.shape, m.width))
    with pytest.raises(ShapeError, match="do not match the split"):
        m.trunk(good[..., :-1], mask)
    bad = good.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ConfigError, match="non-finite"):
        m.trunk(bad, mask)


def test_transcript_round_trip_and_checks(tmp_path: Path) -> None:
    t, _ = tiny_text_transcript()
    assert t.smashed.shape == (*t.mask.shape, 32) and len(t) == 32
    back = TextSplitTranscript.load(t.save(tmp_path / "t"))
    assert torch.equal(back.smashed, t.smashed) and torch.equal(back.body_grads, t.body_grads)
    assert back.split == t.split and back.defense == t.defense
    assert float(t.smashed_grads.abs().sum()) > 0 and float(t.body_grads.abs().sum()) > 0
    fields = dict(public_lm=t.public_lm, split=t.split, mask=t.mask, step=t.step)
    with pytest.raises(ShapeError, match="smashed"):
        TextSplitTranscript(
            **fields,
            smashed=t.smashed[..., :-1],
            smashed_grads=t.smashed_grads,
            body_grads=t.body_grads,
        )
    nan = t.body_grads.clone()
    nan[0, 0, 0] = float("inf")
    with pytest.raises(ConfigError, match="finite"):
        TextSplitTranscript(
            **fields, smashed=t.smashed, smashed_grads=t.smashed_grads, body_grads=nan
        )
    with pytest.raises(ConfigError, match="beyond the model's depth"):
        TextSplitTranscript(
            **{**fields, "split": LMSplit(1, 7)},
            smashed=t.smashed,
            smashed_grads=t.smashed_grads,
            body_grads=t.body_grads,
        )


def test_records_corpus() -> None:
    pools = slot_pools(20, seed=1)
    assert all(len(v) == 20 for v in pools.values.values())
    recs = make_records(50, pools, seed=2)
    for r in recs:
        assert 0 <= r.label < len(TEMPLATES)
        assert sorted(r.slots.values()) == sorted(SLOTS)
        assert all(v in r.text.split() for v in r.slots)
    assert len({r.label for r in recs}) > 4
    with pytest.raises(ConfigError, match="pool_size"):
        slot_pools(1)


def test_decoys_keep_the_real_tokens_in_order() -> None:
    ids = torch.tensor([[2, 10, 11, 12, 0], [2, 20, 21, 0, 0]])
    mask = (ids != 0).long()
    gen = torch.Generator().manual_seed(0)
    out, new_mask, real = insert_decoys(ids, mask, 3, 50, 4, gen)
    assert out.shape == (2, 8) and int(new_mask[0].sum()) == 7 and int(new_mask[1].sum()) == 6
    assert out[0][real[0]].tolist() == [10, 11, 12] and out[1][real[1]].tolist() == [20, 21]
    assert out[0, 0] == 2 and int((~real & new_mask.bool()).sum()) == 2 + 6


def test_mixing_weights_sum_to_one() -> None:
    spec = TextDefenseSpec(kind="mixguard", n_aux=3, signs=True)
    w, s = mixing_weights(spec, 16, torch.Generator().manual_seed(0))
    assert torch.allclose(w.sum(0), torch.ones(16)) and bool((w[0] >= 0.6).all())
    assert set(s.tolist()) == {-1.0, 1.0}
    with pytest.raises(ConfigError, match="n_aux"):
        TextDefenseSpec(kind="mixguard", n_aux=0)
    with pytest.raises(ConfigError, match="sigma"):
        TextDefenseSpec(kind="noise")


def test_calibration_reduces_the_residual_on_held_out_public_data() -> None:
    w = tiny_world()
    m = SplitLM(w.lm, SPLIT)
    calib = Calibrator(m.width, torch.Generator().manual_seed(2))
    gen = torch.Generator().manual_seed(0)
    before = probe_residual(m, None, MIXGUARD, w.public_ids, torch.Generator().manual_seed(1))
    after, _ = fit_calibrator(m, calib, MIXGUARD, w.public_ids, 60, gen, width=24)
    assert after < 0.85 * before, (before, after)


def test_the_calibrators_start_points_and_the_tops_mask() -> None:
    """A fresh calibrator (zero-initialised correction) returns exactly its anchor: the client's
    own clean bottom output (``anchored``) or the linear un-mixing (``unmix``); the top's
    mask drops every decoy position and keeps BOS."""
    w = tiny_world()
    m = SplitLM(w.lm, SPLIT)
    pool = w.public_ids[:-32]
    gen = torch.Generator().manual_seed(3)
    ids, mask = w.test[0][:6], w.test[1][:6]
    tok = m.lm.tokenizer
    ob = obfuscate(MIXGUARD, ids, mask, m.bottom, pool, len(tok), int(tok.pad_token_id), gen)
    with torch.no_grad():
        z = m.trunk(ob.hidden, ob.mask)
        clean = m.bottom(ob.ids, ob.mask)
        anchored = Calibrator(m.width, torch.Generator().manual_seed(2))(z, ob)
        unmix = Calibrator(m.width, torch.Generator().manual_seed(2), anchor="unmix")(z, ob)
    assert torch.equal(anchored, clean) and torch.equal(ob.clean, clean)
    assert torch.equal(unmix, z * ob.signs)  # no cache: the un-signing alone
    assert not torch.allclose(anchored, unmix)
    top = ob.top_mask.bool()
    assert bool(top[:, 0].all()) and bool((top[:, 1:] <= ob.real[:, 1:]).all())
    assert torch.equal(top.sum(1), ob.mask.sum(1) - MIXGUARD.n_insert)
    assert bool((top <= ob.mask.bool()).all())
    with pytest.raises(ConfigError, match="anchor"):
        Calibrator(8, gen, anchor="linear")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_anchored_calibrator_fits_closer_than_the_linear_unmixing(seed: int) -> None:
    """Same public data, steps and seeds: the calibrator anchored at the client's own state
    ends with a smaller held-out residual than the one anchored at the linear un-mixing
    (measured 0.45-0.47 against 0.55-0.61 over three seeds)."""
    w = tiny_world()
    m = SplitLM(w.lm, SPLIT)
    res = {}
    for anchor in ("anchored", "unmix"):
        spec = dataclasses.replace(MIXGUARD, calibrator=anchor)
        calib = Calibrator(m.width, torch.Generator().manual_seed(2), anchor=anchor)
        gen = torch.Generator().manual_seed(seed)
        res[anchor], _ = fit_calibrator(m, calib, spec, w.public_ids, 60, gen, width=24)
    assert res["anchored"] < 0.9 * res["unmix"], res


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_the_learning_rate_schedule(schedule: str) -> None:
    cfg = SplitTrainingConfig(steps=10, schedule=schedule)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    (sched,) = schedulers(cfg, opt)
    seen = []
    for _ in range(cfg.steps):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen[0] == 0.5
    if schedule == "cosine":
        assert all(a > b for a, b in zip(seen, seen[1:], strict=False)) and seen[-1] < 0.02
        assert seen[5] == pytest.approx(0.25)
    else:
        assert seen == [0.5] * 10
    with pytest.raises(ConfigError, match="schedule"):
        SplitTrainingConfig(schedule="linear")


def test_lora_trains_only_the_trunk_adapters_and_the_top() -> None:
    w = tiny_world()
    cfg = SplitTrainingConfig(steps=3, batch_size=8, record_rows=8, lora=LoraSettings(r=2))
    run = train_split(w.lm, SPLIT, w.train, w.public_ids, TextDefenseSpec(), cfg)
    before = dict(w.lm.module.named_parameters())
    after = dict(run.model.lm.module.named_parameters())
    lora = [n for n in after if "lora_" in n]
    assert lora and all(".h.1." in n for n in lora)  # the trunk is block 1
    base = {n.replace(".base_layer", ""): p for n, p in after.items() if "lora_" not in n}
    assert set(base) == set(before)
    for n, p in before.items():
        moved = not torch.equal(p, base[n])
        assert moved == (".h.2." in n or "ln_f" in n), n  # only the top's own weights moved


def test_metrics() -> None:
    t = torch.tensor([[1, 2, 3, 4]])
    p = torch.tensor([[1, 9, 3, 4]])
    keep = torch.ones_like(t).bool()
    assert token_recovery(p, t, keep) == 0.75
    assert rouge_l(p, t, keep, keep) == pytest.approx(0.75)
    assert rouge_l(torch.tensor([[4, 3, 2, 1]]), t, keep, keep) == pytest.approx(0.25)
    assert positional_prior(torch.tensor([[5, 1], [5, 2], [6, 2]]), 3).tolist() == [5, 2, 2]
    with pytest.raises(ShapeError):
        token_recovery(p[:, :2], t, keep)


def test_undefended_inversion_beats_the_positional_prior() -> None:
    w = tiny_world()
    run = tiny_run("none")
    base = baseline_score(w, run)
    inv = attack_run(w, run, LearnedInverter(steps=150))
    bisr = attack_run(w, run, BiSRRefinement(inverter_steps=150, top_k=8))
    assert inv.token_recovery > base.token_recovery + 0.2, (inv, base)
    assert bisr.token_recovery >= inv.token_recovery - 0.02 and bisr.token_recovery > 0.8
    assert inv.rouge_l > base.rouge_l


def test_mixguard_hides_tokens_from_the_plain_inverter() -> None:
    w = tiny_world()
    clear = attack_run(w, tiny_run("none"), LearnedInverter(steps=150))
    mixed = attack_run(w, tiny_run("mixguard"), LearnedInverter(steps=150))
    assert mixed.token_recovery < clear.token_recovery - 0.3, (clear, mixed)
    assert (
        tiny_run("mixguard").transcript.mask.shape[1]
        == tiny_run("none").transcript.mask.shape[1] + 2
    )


def test_the_attacker_reads_magnitudes_only_under_a_sign_mask() -> None:
    h = torch.randn(2, 3, 4)
    assert torch.equal(features(h, MIXGUARD, True), h.abs())
    assert torch.equal(features(h, MIXGUARD, False), h)
    unsigned = TextDefenseSpec(kind="mixguard", n_insert=2, n_aux=2, signs=False)
    assert torch.equal(features(h, unsigned, True), h)
    assert torch.equal(features(h, TextDefenseSpec(kind="noise", sigma=1.0), True), h)


def test_the_sign_mask_does_not_hide_magnitudes() -> None:
    """MIXGUARD's secret channel signs defeat an adaptive inverter that reads signed values,
    not one that reads magnitudes (measured at steps 150: 0.05 against 0.69 token recovery)."""
    w = tiny_world()
    run = tiny_run("mixguard")
    blind = attack_run(w, run, AdaptiveInverter(steps=150, sign_invariant=False))
    reads = attack_run(w, run, AdaptiveInverter(steps=150))
    assert reads.token_recovery > blind.token_recovery + 0.4, (blind, reads)
    assert reads.slot_recovery > blind.slot_recovery + 0.1, (blind, reads)  # 0.008 -> 0.21
