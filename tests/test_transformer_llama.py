"""Transformer gradient inversion on a LLaMA-style decoder (issue 14, SmolLM2's architecture:
RMSNorm, no position embedding, RoPE after the projections, tied embeddings): the run of a
first token that passes every span test, and both attacks exact on a tiny random model."""

from __future__ import annotations

import pytest
import torch

from language_fixtures import _tokenizer, random_texts
from trainleak.attacks.transformer._coverage import new_directions, repeated, select
from trainleak.attacks.transformer._spans import build_spans
from trainleak.attacks.transformer.dager import Dager
from trainleak.attacks.transformer.tiger import Tiger
from trainleak.models.language import LanguageModel, tiny_causal_lm
from trainleak.scenarios.transformer_gradients import client_release, run_attacks

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _tiny_llama(seed: int = 0) -> LanguageModel:
    lm = tiny_causal_lm(
        _tokenizer(), n_layer=2, n_embd=64, n_head=2, max_length=16, seed=seed, family="llama"
    )
    lm.module.double()
    return lm


def test_a_run_of_the_first_token_passes_every_span_test() -> None:
    """The cause: a run ``v v v`` repeats ``v``'s hidden state exactly (no position embedding,
    attention averages equal values), so it fits both spans like the true sequence, while a
    wrong token after the true prefix does not; and the zero padding row is no candidate."""
    lm = _tiny_llama()
    batch, rel = client_release(lm, random_texts(1, 0), 8)
    true = batch.sequences()[0]
    spans = build_spans(rel, batch=1, rank="tolerance", tol=None, exact=True)
    assert spans.position_free
    run = [true[0]] * (len(true) - 1) + [spans.end_id]
    d_true, d_run = spans.distances([true, run])
    assert float(d_true.max()) < 1e-12 and float(d_run.max()) < 1e-12
    wrong = true[:2] + [next(v for v in true if v != true[2])] + true[3:]
    assert float(spans.distances([wrong])[0][1, 2]) > 1e-3
    pad = lm.tokenizer.pad_token_id
    assert float(lm.module.get_input_embeddings().weight[pad].norm()) == 0.0
    assert float(spans.table[:, pad].min()) == 1.0
    # what tells them apart: the directions each adds to the layer-2 span
    f_true, f_run = (f[1] for f in spans.features([true, run]))
    empty = f_true.new_zeros(f_true.shape[1], 0)
    assert new_directions(f_true, empty, 1e-6)[0] == len(true) - 1
    assert new_directions(f_run, empty, 1e-6)[0] == 1
    assert select(spans, [(run, 0.0), (true, 1e-15)], 1, 1e-6) == [(true, 1e-15)]


@pytest.mark.parametrize("batch", [1, 3])
def test_both_attacks_recover_a_tiny_llama_batch_exactly(batch: int) -> None:
    lm = _tiny_llama()
    texts = random_texts(batch, 0)
    tb, rel = client_release(lm, texts, 8)
    cells = run_attacks(tb, rel, {"dager": Dager(), "tiger": Tiger(steps=40)})
    for cell in cells:
        assert cell.scores.exact_rate == 1.0, cell
        assert cell.scores.token_accuracy == pytest.approx(1.0)


def test_new_directions_counts_the_rank_added() -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 10, generator=g, dtype=torch.float64)
    base, _ = torch.linalg.qr(z[:2].T)
    added, q = new_directions(torch.cat([z[2:], z[:1], z[2:3] + z[3:4]]), base, 1e-9)
    assert added == 2 and q.shape == (10, 4)
    assert torch.allclose(q.T @ q, torch.eye(4, dtype=torch.float64), atol=1e-12)


def test_near_parallel_inputs_are_new_but_copies_are_repeated() -> None:
    """TIGER's decoder peeling credits a position that adds a direction, however close to the
    accepted ones (SmolLM2 positions of different sentences reach cos^2 0.996): only exact
    copies and earlier positions repeated count as explained."""
    g = torch.Generator().manual_seed(1)
    accepted = torch.nn.functional.normalize(torch.randn(3, 16, generator=g, dtype=torch.float64))
    basis, _ = torch.linalg.qr(accepted.T)
    near = accepted[0] + 0.03 * torch.randn(16, generator=g, dtype=torch.float64)
    near = near / near.norm()
    assert float(near @ accepted[0]) ** 2 > 0.99
    z = torch.stack([near, accepted[1], near, torch.randn(16, generator=g, dtype=torch.float64)])
    assert repeated(z, 1e-6, basis).tolist() == [False, True, True, False]
    assert repeated(z, 1e-6).tolist() == [False, False, True, False]
