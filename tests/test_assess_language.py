"""Assessing a user's own open-weight language model for membership, end to end through
``trainleak assess``: a model fine-tuned hard on its members gives them away (high risk,
beyond the chance expectation at FPR <= 1 %); its public base model does not. Folders written
by trainleak and Hugging Face folders (safetensors) both load; bad inputs are named errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the text extra is not installed")

from assess_helpers import assess_cli  # noqa: E402
from language_fixtures import toy_language_release  # noqa: E402
from trainleak.attacks import get_attack  # noqa: E402
from trainleak.audit.assess import assess  # noqa: E402
from trainleak.audit.assess_text import (  # noqa: E402
    TextReference,
    auroc,
    chance_quantile,
    members_identified,
)
from trainleak.errors import ConfigError, DataNotFoundError, MetadataError  # noqa: E402
from trainleak.models.language import load_causal_lm_folder, save_language_model  # noqa: E402
from trainleak.releases.io import load_release  # noqa: E402
from trainleak.releases.knowledge import Knowledge  # noqa: E402
from trainleak.releases.knowledge_file import load_knowledge  # noqa: E402
from trainleak.releases.language import LanguageModelRelease  # noqa: E402


def _files(tmp: Path, model: str = "target") -> tuple[Path, Path, Path]:
    release, texts, labels = toy_language_release()
    save_language_model(release.model, tmp / "target")
    assert release.reference is not None
    save_language_model(release.reference, tmp / "base")
    spec = {"type": "language_model", "model": model, "reference": "base", "max_length": 32}
    (tmp / "release.json").write_text(json.dumps(spec))
    (tmp / "candidates.txt").write_text("\n".join(texts) + "\n")
    (tmp / "knowledge.yaml").write_text("candidate_texts: candidates.txt\n")
    members = [t for t, m in zip(texts, labels, strict=True) if m]
    (tmp / "members.txt").write_text("\n".join(members) + "\n")
    return tmp / "release.json", tmp / "knowledge.yaml", tmp / "members.txt"


def test_fine_tuned_model_is_high_risk_and_its_base_model_is_not(tmp_path: Path) -> None:
    """Every attack on the fine-tuned model through the CLI; the passive scores on its base
    model, which never saw the members. (ADRA, which fine-tunes on the candidates, credits the
    base model with 4 of 8 against the quantile 3: the toy sentences are a function of their
    index, and members and non-members differ in their words, so the base model is not blind
    to the split for an attack that learns from the candidates.)"""
    (tmp_path / "target").mkdir()
    rel, know, members = _files(tmp_path / "target")
    table, doc = assess_cli(rel, know, members, tmp_path / "target" / "out")
    assert doc["risk"]["level"] == "high"
    assert "chance (its 95% quantile, as the rule says)" in doc["risk"]["verdict"]
    row = table["lm-passive"]
    assert row["of"] == 8 and row["recovered"] >= row["baseline recovered"] + 4, row
    (tmp_path / "base").mkdir()
    rel, know, members = _files(tmp_path / "base", "base")
    a = assess(rel, know, private=members, attacks=["lm-passive", "lm-n-sampling"])
    assert a.card.level != "high"
    for r in a.runs:
        f = r.scored.finding if r.scored is not None else None
        assert f is not None and f.recovered is not None and f.baseline_recovered is not None
        assert f.recovered <= f.baseline_recovered, (r.name, f)


def test_texts_cut_to_max_length_are_named_in_the_finding(tmp_path: Path) -> None:
    """Candidates longer than the attack's window are scored on a prefix; the finding says how
    many and how to widen it (at the default window nothing is cut, and nothing is said)."""
    rel, know, members = _files(tmp_path)
    narrow = {"lm-passive": {"max_length": 4}, "lm-n-sampling": {"max_length": 3}}
    cut = assess(rel, know, private=members, attacks=list(narrow), settings=narrow)
    n = len(load_knowledge(know).candidate_texts or ())
    for r in cut.runs:
        assert r.scored is not None, r.name
        width = 4 if r.name == "lm-passive" else 3
        assert r.scored.metrics["candidate texts cut to max_length"] == n
        assert f"{n} of {n} candidate texts are longer than {width} tokens" in (
            r.scored.finding.detail
        )
        assert f"--set {r.name}.max_length=N" in r.scored.finding.detail
    whole = assess(rel, know, private=members, attacks=["lm-passive"])
    assert whole.runs[0].scored is not None
    assert whole.runs[0].scored.metrics["candidate texts cut to max_length"] == 0
    assert "longer than" not in whole.runs[0].scored.finding.detail


def test_attacks_read_at_most_the_models_context_by_default() -> None:
    """Called directly on a model whose context (32) is below the default window (64), the
    attacks read 32 tokens; an explicit window beyond the context is a named error."""
    release, texts, _ = toy_language_release()
    know = Knowledge(candidate_texts=tuple(texts))
    rec = get_attack("lm-passive")(release, know)
    assert rec.diagnostics["max_length"] == 32
    ns = get_attack("lm-n-sampling", n_samples=2, max_new_tokens=4)(release, know)
    assert ns.diagnostics["max_length"] == 32
    assert get_attack("lm-passive", max_length=16)(release, know).diagnostics["max_length"] == 16
    with pytest.raises(ConfigError, match="max_length"):
        get_attack("lm-passive", max_length=64)(release, know)


def test_adra_counts_as_cut_only_what_it_reads_in_tokens() -> None:
    """At a window of 8 tokens the prompts (a quarter of each text's words) fit and the whole
    texts do not: ADRA, whose reward compares suffixes as text, cut none; ADRA+, whose prior
    scores whole texts, cut all of them."""
    release, texts, _ = toy_language_release()
    know = Knowledge(candidate_texts=tuple(texts))
    small = {"steps": 1, "max_length": 8, "n_samples": 2, "max_new_tokens": 4}
    small |= {"prompts_per_step": 2, "group": 2}
    assert get_attack("adra", **small)(release, know).diagnostics["truncated"] == 0
    assert get_attack("adra-plus", **small)(release, know).diagnostics["truncated"] == len(texts)


def test_membership_count_and_auroc_on_hand_made_scores() -> None:
    member = torch.tensor([True, True, True, False, False, False, False])
    scores = torch.tensor([0.9, 0.5, 0.1, 0.6, 0.2, 0.3, 0.0])
    # 4 non-members: floor(0.04) = 0 may pass, so the threshold is the top non-member (0.6)
    assert members_identified(scores, member) == 1
    assert auroc(scores, member) == pytest.approx((4 + 3 + 1) / 12)
    assert members_identified(torch.tensor([1.0, 0.0]), torch.tensor([True, False])) == 1


def test_chance_quantile_matches_random_orders() -> None:
    """8 members, 8 non-members: P(K >= 3) = 0.1 and P(K >= 4) = 0.038 (the top 3 or 4 of a
    random order all members), so the 95% quantile is 3; checked by simulation too."""
    assert chance_quantile(8, 8) == 3
    gen = torch.Generator().manual_seed(0)
    member = torch.tensor([True] * 8 + [False] * 8)
    counts = torch.tensor(
        [members_identified(torch.rand(16, generator=gen), member) for _ in range(4000)]
    )
    assert float((counts > 3).double().mean()) <= 0.05 < float((counts > 2).double().mean())


def test_candidates_without_non_members_are_not_scored(tmp_path: Path) -> None:
    release, texts, labels = toy_language_release()
    members = tuple(t for t, m in zip(texts, labels, strict=True) if m)
    a = assess(
        release,
        Knowledge(candidate_texts=members),
        private=TextReference(members),
        attacks=["lm-passive"],
    )
    run = a.run("lm-passive")
    assert run.scored is not None and run.scored.finding.recovered is None
    assert "both are needed" in run.scored.metrics["not scored"]
    assert a.card.level == "review"


def test_hugging_face_folder_loads_as_the_same_model(tmp_path: Path) -> None:
    release, texts, _ = toy_language_release()
    lm = release.model
    lm.module.save_pretrained(tmp_path / "hf", safe_serialization=True)
    lm.tokenizer.save_pretrained(tmp_path / "hf")
    loaded = load_causal_lm_folder(tmp_path / "hf", max_length=32)
    enc = lm.tokenizer(list(texts[:4]), return_tensors="pt", padding=True)
    with torch.no_grad():
        mine = lm.module(**enc).logits
        theirs = loaded.module(**loaded.tokenizer(list(texts[:4]), return_tensors="pt",
                                                  padding=True)).logits  # fmt: skip
    assert torch.allclose(mine, theirs, atol=1e-5)
    (tmp_path / "hf" / "model.safetensors").unlink()
    (tmp_path / "hf" / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(DataNotFoundError, match="pickled weights"):
        load_causal_lm_folder(tmp_path / "hf")


def test_bad_language_model_specs_are_named_errors(tmp_path: Path) -> None:
    rel, _, _ = _files(tmp_path)
    loaded = load_release(rel)
    assert loaded.kind == "language_model" and isinstance(loaded.release, LanguageModelRelease)
    (tmp_path / "bad.json").write_text(json.dumps({"type": "language_model", "model": "nowhere"}))
    with pytest.raises(DataNotFoundError, match="nowhere"):
        load_release(tmp_path / "bad.json")
    (tmp_path / "bad2.json").write_text(json.dumps({"type": "language_model", "modle": "x"}))
    with pytest.raises(MetadataError, match="model: required field is missing"):
        load_release(tmp_path / "bad2.json")
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "k.yaml").write_text("candidate_texts: empty.txt\n")
    with pytest.raises(MetadataError, match="no text"):
        assess(rel, tmp_path / "k.yaml")
