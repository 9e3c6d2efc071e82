"""LM membership (issue 15): passive scores, the ADRA reward, GRPO, ADRA / ADRA+ and n-sampling
on a toy over-fitted release, bootstrap AUROC intervals, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from language_fixtures import toy_language_release
from trainleak.attacks import get_attack
from trainleak.attacks.language.grpo import GRPOSettings, group_advantages, grpo_step
from trainleak.attacks.language.passive import (
    lowest_k_mean,
    minkpp_tokens,
    passive_scores,
    rank_normalise,
    score_release,
)
from trainleak.attacks.language.reconstruct import make_prompts
from trainleak.attacks.language.reward import (
    contrastive_reward,
    coverage,
    length_penalty,
    split_prompt,
    words,
)
from trainleak.errors import ConfigError, MissingKnowledgeError
from trainleak.metrics.membership import auroc
from trainleak.metrics.roc_bootstrap import auroc_difference_interval, auroc_interval
from trainleak.models.language import LanguageModel, TokenScores, tiny_encoder
from trainleak.releases.knowledge import Knowledge
from trainleak.releases.language import LanguageModelRelease
from trainleak.scenarios.language import choose_step
from trainleak.systems.language import MembershipSplit


def test_minkpp_matches_a_hand_computed_value():
    # Two scored tokens: (lp - mu) / sigma = (-1 - -2) / 0.5 = 2 and (-3 - -1) / 1 = -2;
    # the third position is padding. Min-K%++ at k = 0.5 keeps the lowest one: -2.
    scores = TokenScores(
        logprob=torch.tensor([[-1.0, -3.0, 0.0]]),
        mean=torch.tensor([[-2.0, -1.0, 0.0]]),
        var=torch.tensor([[0.25, 1.0, 1.0]]),
        mask=torch.tensor([[True, True, False]]),
    )
    torch.testing.assert_close(minkpp_tokens(scores)[0, :2], torch.tensor([2.0, -2.0]))
    out = passive_scores(scores, ["a b"], ks=(0.5, 1.0))
    assert out["minkpp@0.5"].item() == pytest.approx(-2.0)
    assert out["minkpp@1"].item() == pytest.approx(0.0)
    assert out["mink@0.5"].item() == pytest.approx(-3.0)
    assert out["loss"].item() == pytest.approx(-2.0)


def test_lowest_k_mean_rounds_up_and_ignores_padding():
    v = torch.tensor([[5.0, 1.0, 3.0, -9.0]])
    m = torch.tensor([[True, True, True, False]])
    assert lowest_k_mean(v, m, 0.1).item() == pytest.approx(1.0)  # ceil(0.3) = 1 token
    assert lowest_k_mean(v, m, 0.5).item() == pytest.approx(2.0)  # ceil(1.5) = 2 tokens
    with pytest.raises(ConfigError):
        lowest_k_mean(v, m, 0.0)


def test_coverage_matches_hand_computed_cases():
    ref = "The cat sat on a mat."
    assert words(ref) == ["the", "cat", "sat", "on", "a", "mat"]
    assert coverage("the cat sat on a mat", ref, (2, 2)) == pytest.approx(1.0)
    # bigrams of the reference: 5; hits: the cat, cat sat, sat on -> 3/5
    assert coverage("the cat sat on the rug", ref, (2, 2)) == pytest.approx(0.6)
    # 3 of 6 words: ratio 0.5 < 1/1.5, so multiplied by 0.5; hits 2/5 bigrams
    assert coverage("the cat sat", ref, (2, 2)) == pytest.approx(0.4 * 0.5)
    # 10 words against 6: ratio 5/3 > 1.5, multiplied by 0.6; all 5 bigrams hit
    long = "the cat sat on a mat and then it left"
    assert coverage(long, ref, (2, 2)) == pytest.approx(1.0 * 0.6)
    # inside the tolerance there is no penalty (8 / 6 = 1.33)
    assert length_penalty(8, 6, 1.5) == 1.0 and length_penalty(0, 6, 1.5) == 0.0
    # 2..3-grams: 5 bigrams + 4 trigrams; "the cat sat on" hits 3 + 2
    assert coverage("the cat sat on x y", ref, (2, 3)) == pytest.approx(5 / 9)


def test_contrastive_reward_adra_and_adra_plus():
    own, other = "alpha beta gamma delta", "one two three four"
    copy_other = "one two three four"
    assert contrastive_reward(copy_other, own, [other]) == pytest.approx(1.0)  # ADRA: max
    assert contrastive_reward(own, own, [other], prior=0.0) == pytest.approx(0.0)
    assert contrastive_reward(own, own, [other], prior=1.0) == pytest.approx(1.0)
    assert contrastive_reward(own, own, [other], prior=0.25) == pytest.approx(0.25)
    with pytest.raises(ConfigError):
        contrastive_reward(own, own, [other], prior=1.5)


def test_split_prompt_and_bad_splits():
    assert split_prompt("a b c d e f g h", 0.25) == ("a b", "c d e f g h")
    with pytest.raises(ConfigError):
        split_prompt("single", 0.25)
    with pytest.raises(ConfigError):
        split_prompt("a b c", 1.0)


def test_group_advantages_are_normalised_per_group():
    r = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    a = group_advantages(r)
    torch.testing.assert_close(a[0].mean(), torch.tensor(0.0))
    assert a[0].std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
    assert torch.all(a[1] == 0)


def _expected_reward(policy, prompts, reward, seed=7, n=64):
    from trainleak.models.language import generate

    gen = generate(policy, prompts, 6, 1.0, 1.0, 0, n, torch.Generator().manual_seed(seed))
    return sum(reward(i, t) for i, row in enumerate(gen.texts(policy)) for t in row) / (
        n * len(prompts)
    )


def test_one_grpo_step_raises_the_reward():
    release, texts, _ = toy_language_release()
    base = release.reference
    policy = LanguageModel(
        __import__("copy").deepcopy(base.module), base.tokenizer, "causal", "p", base.spec
    )
    prompts = make_prompts(policy, list(texts[:4]), 0.25, 32).ids

    nouns = {"cat", "dog", "bird", "horse", "fish", "fox", "owl", "bear", "wolf", "mouse"}

    def reward(i: int, text: str) -> float:  # the share of animal words
        w = words(text)
        return sum(x in nouns for x in w) / max(1, len(w))

    before = _expected_reward(policy, prompts, reward)
    settings = GRPOSettings(
        prompts_per_step=4, group=16, max_new_tokens=6, lr=1e-2, kl=0.0, top_p=1.0, top_k=0
    )
    opt = torch.optim.Adam(policy.module.parameters(), lr=settings.lr)
    rec = grpo_step(
        policy, base.module, opt, prompts, reward, settings, torch.Generator().manual_seed(0)
    )
    after = _expected_reward(policy, prompts, reward)
    assert rec["samples"] == 64 and 0 < rec["gen_seconds"] <= rec["seconds"]
    assert after > before + 0.1


def test_every_passive_score_beats_chance_on_an_overfitted_target():
    release, texts, labels = toy_language_release()
    target, ref, _ = score_release(release, list(texts), 32, 8)
    scores = passive_scores(target, list(texts), ref)
    mem = torch.tensor(labels)
    aucs = {k: auroc(v, mem) for k, v in scores.items()}
    assert len(aucs) == 11 and min(aucs.values()) > 0.8, aucs


def test_n_sampling_and_adra_run_and_choose_the_step_on_calibration():
    release, texts, labels = toy_language_release()
    know = Knowledge(candidate_texts=texts)
    fast = {
        "steps": 2,
        "prompts_per_step": 4,
        "group": 4,
        "n_samples": 4,
        "max_new_tokens": 8,
        "eval_every": 1,
        "max_length": 32,
    }
    ns = get_attack("lm-n-sampling", n_samples=4, max_new_tokens=8, max_length=32)(release, know)
    adra = get_attack("adra-plus", **fast)(release, know, seed=1)
    d = adra.diagnostics
    assert sorted(d["scores_per_step"]) == [0, 1, 2]
    # the step budget is chosen by the caller on the first six (labelled) candidates only
    per_step = {s: torch.tensor(v[:6]) for s, v in d["scores_per_step"].items()}
    chosen, calib = choose_step(per_step, torch.tensor(labels[:6]))
    assert set(calib) == {0, 1, 2}
    best = max(calib.values())
    assert calib[chosen] == best
    assert adra.scores.shape == (len(texts),) and ns.scores.shape == (len(texts),)
    assert 0 < d["generation_share"] < 1 and len(adra.trace) == 2
    assert d["rl_samples_per_cpu_second"] > 0 and all(r["cpu_seconds"] > 0 for r in adra.trace)
    # step 0 of ADRA is n-sampling with the released model
    assert len(d["scores_per_step"][0]) == len(texts)


def test_long_candidates_are_truncated_and_reported():
    release, texts, _ = toy_language_release()
    long = texts[0] + " " + " ".join([texts[1]] * 3)
    rec = get_attack("lm-passive", max_length=16)(
        release, Knowledge(candidate_texts=(long, texts[1]))
    )
    assert rec.diagnostics["truncated"] == 1 and torch.isfinite(rec.scores).all()


def test_language_bad_input():
    release, texts, _ = toy_language_release()
    with pytest.raises(ConfigError, match="empty"):
        get_attack("lm-passive", max_length=32)(release, Knowledge(candidate_texts=("a b", " ")))
    with pytest.raises(MissingKnowledgeError):
        get_attack("lm-passive")(release, Knowledge())
    with pytest.raises(ConfigError, match="ngram_max"):
        get_attack("adra", ngram_min=4, ngram_max=2)
    enc = tiny_encoder(release.model.tokenizer, hidden=32)
    with pytest.raises(ConfigError, match="causal"):
        LanguageModelRelease(model=enc)
    with pytest.raises(ConfigError, match="both members and non-members"):
        MembershipSplit(("a b", "c d"), (True, False), ("a b",), (False,))
    no_ref = LanguageModelRelease(model=release.model)
    with pytest.raises(MissingKnowledgeError, match="reference"):
        get_attack("lm-passive", score="reference", max_length=32)(
            no_ref, Knowledge(candidate_texts=texts)
        )


def test_auroc_intervals():
    g = torch.Generator().manual_seed(0)
    mem = torch.arange(200) % 2 == 0
    s = torch.randn(200, generator=g) + mem.float()
    lo, hi = auroc_interval(s, mem, n_boot=500)
    point = auroc(s, mem)
    assert lo < point < hi and hi - lo < 0.2
    dlo, dhi = auroc_difference_interval(s, s, mem, n_boot=200)
    assert dlo == dhi == 0.0
    worse = s + 3 * torch.randn(200, generator=g)
    dlo, dhi = auroc_difference_interval(s, worse, mem, n_boot=500)
    assert dlo > 0
    assert rank_normalise(torch.tensor([3.0, 1.0, 2.0])).tolist() == [1.0, 0.0, 0.5]
    assert math.isfinite(lo)


def test_adra_with_lora_adapters_leaves_the_release_untouched():
    release, texts, _ = toy_language_release()
    before = {k: v.clone() for k, v in release.model.module.state_dict().items()}
    rec = get_attack(
        "adra",
        steps=1,
        prompts_per_step=4,
        group=2,
        n_samples=2,
        max_new_tokens=6,
        max_length=32,
        lora_r=4,
        lr=1e-2,
    )(release, Knowledge(candidate_texts=texts))
    assert len(rec.trace) == 1 and rec.trace[0]["samples"] == 8
    after = release.model.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_choose_step_takes_the_best_calibration_auroc_earliest_and_needs_both_classes():
    member = torch.tensor([True, True, False, False])
    per_step = {
        0: torch.tensor([0.1, 0.2, 0.3, 0.4]),  # AUROC 0
        5: torch.tensor([0.9, 0.8, 0.1, 0.2]),  # AUROC 1
        10: torch.tensor([0.7, 0.6, 0.1, 0.0]),  # AUROC 1, later
    }
    chosen, calib = choose_step(per_step, member)
    assert chosen == 5 and calib == {0: 0.0, 5: 1.0, 10: 1.0}
    assert choose_step(per_step, torch.tensor([True] * 4)) == (10, {})
