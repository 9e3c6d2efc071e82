"""Gradient attacks: certified erasure decoding, imprint, DLG/iDLG, Inverting Gradients."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from release_fixtures import tiny_honest_update, tiny_malicious_update
from trainleak.attacks.base import Reconstruction
from trainleak.attacks.gradient._common import release_model, tiny_batch
from trainleak.attacks.gradient._objectives import recover_labels
from trainleak.attacks.gradient._span import SpanDecoder, SpanState
from trainleak.attacks.gradient.dlg import IDLG
from trainleak.attacks.gradient.erasure import ErasureDecodingActive, ErasureDecodingPassive
from trainleak.attacks.gradient.imprint import ImprintAttack
from trainleak.attacks.gradient.inverting import InvertingGradients
from trainleak.defenses.gradient import ClipNorm, GaussianNoise
from trainleak.errors import ConfigError
from trainleak.metrics.exact_recovery import audit_certificates, score_exact_recovery
from trainleak.models import build_model, model_spec
from trainleak.models.functional import FirstLayerSplit
from trainleak.releases import Knowledge
from trainleak.scenarios.federated import active_cell, passive_cell, trained_mlp
from trainleak.systems.federated import fedavg_update, fedsgd_update
from trainleak.systems.federated.data import Pool, load_pool
from trainleak.systems.federated.malicious import malicious_mlp

ACTIVE = Knowledge(input_shape=(12,), value_range=(0.0, 1.0), active=True)


@pytest.fixture(scope="module")
def mnist_pool(data_dir: Path) -> Pool:
    """500 public and 1000 private MNIST digits, shared by the tests of this module."""
    return load_pool("mnist", n_public=500, data_dir=data_dir, limit=1500)


def test_active_decoding_recovers_and_certifies_an_mnist_batch_exactly(mnist_pool: Pool) -> None:
    erasure, imprint = active_cell(mnist_pool, 64, neurons=128, n_groups=3, seed=0)
    assert erasure["exact_rate"] == 1.0 and erasure["certified_fraction"] == 1.0
    assert erasure["max_error"] <= 1e-12  # float64 exactness, far below the 1e-6 target
    assert erasure["label_accuracy"] == 1.0 and erasure["batch_certified"]
    assert erasure["false_certificates"] == 0
    assert imprint["exact_rate"] < 0.8 <= erasure["exact_rate"] - 0.2  # beats Robbing the Fed


def test_unknown_batch_size_is_inferred_from_single_sample_rows() -> None:
    upd, kn = tiny_malicious_update(batch=6)
    rec = ErasureDecodingActive()(dataclasses.replace(upd, batch_size=None), kn)
    assert rec.diagnostics["batch_size"] == 6 and int(rec.certified.sum()) == 6
    assert not rec.diagnostics["batch_certified"]  # the count is then an assumption, not proven
    assert rec.diagnostics["certificate_reason"] == "batch size not given"


def test_a_batch_size_the_update_contradicts_is_reported_and_certifies_nothing() -> None:
    """No ratio can prove a given B wrong (k near-identical samples give B / k), so the
    conflict is reported instead of raised, and nothing is certified."""
    upd, kn = tiny_malicious_update(batch=6)
    rec = ErasureDecodingActive()(dataclasses.replace(upd, batch_size=9), kn)
    assert rec.diagnostics["batch_size_conflict"] == pytest.approx(6.0, rel=1e-6)
    assert int(rec.certified.sum()) == 0 and not rec.diagnostics["batch_certified"]


def test_duplicate_samples_are_recovered_but_never_certified() -> None:
    """A duplicate's update equals that of a pair differing along the logits' null space."""
    public, _ = tiny_batch(200, 12, seed=100)
    spec, params = malicious_mlp((12,), 3, public, n_groups=3, bins_per_group=8, hidden=8)
    x, y = tiny_batch(5, 12, seed=3)
    x, y = torch.cat([x, x[:1]]), torch.cat([y, y[:1]])  # sample 0 twice, same label
    rec = ErasureDecodingActive()(fedsgd_update(spec, params, x, y), ACTIVE)
    scores = score_exact_recovery(x, y, rec)
    assert scores.exact_rate == 1.0 and rec.diagnostics["n_decoded"] == 6
    assert int(rec.certified.sum()) == 0 and not rec.diagnostics["batch_certified"]
    assert "without a pivot row" in rec.diagnostics["certificate_reason"]


def test_ambiguous_bins_never_yield_a_false_certificate() -> None:
    """Overloaded layers (B well above the 2-core threshold), same input with two labels."""
    public, _ = tiny_batch(200, 12, seed=100)
    false, certified, total = 0, 0, 0
    for seed in range(12):
        spec, params = malicious_mlp(
            (12,), 3, public, n_groups=3, bins_per_group=4, hidden=8, seed=seed
        )
        x, y = tiny_batch(14, 12, seed=seed)
        x = torch.cat([x, x[:1]])
        y = torch.cat([y, (y[:1] + 1) % 3])  # same input, different label
        rec = ErasureDecodingActive()(fedsgd_update(spec, params, x, y), ACTIVE)
        audit = audit_certificates(x, y, rec)
        false += audit.false + audit.bound_violations + int(audit.batch_false)
        certified += audit.certified
        total += int(score_exact_recovery(x, y, rec).exact_rate * 15)
    assert false == 0
    assert certified < total  # the decoder recovers samples it cannot certify


def test_float32_updates_are_decoded_without_false_certificates() -> None:
    """float32: exact to 1e-4, certified to the float32 tolerance 1e-3 where provable."""
    public, _ = tiny_batch(200, 12, seed=100)
    certified = 0
    for seed in range(4):
        spec, params = malicious_mlp(
            (12,),
            3,
            public,
            n_groups=3,
            bins_per_group=16,
            hidden=8,
            dtype=torch.float32,
            seed=seed,
        )
        x, y = tiny_batch(4, 12, seed=4 + seed)
        rec = ErasureDecodingActive()(fedsgd_update(spec, params, x.float(), y), ACTIVE)
        assert score_exact_recovery(x, y, rec, atol=1e-4).exact_rate == 1.0
        audit = audit_certificates(x, y, rec, atol=1e-3)
        assert audit.false == 0 and audit.bound_violations == 0 and not audit.batch_false
        certified += audit.certified
    assert certified >= 4


def test_gradient_noise_stops_certificates_but_not_the_guessing() -> None:
    upd, kn = tiny_malicious_update(batch=6)
    noisy = GaussianNoise(1e-4, relative=True)(upd, torch.Generator().manual_seed(0))
    rec = ErasureDecodingActive()(noisy, kn)
    assert int(rec.certified.sum()) == 0
    x, y = tiny_batch(6, 12, seed=0)
    clean = score_exact_recovery(x, y, ImprintAttack()(upd, kn))
    blurred = score_exact_recovery(x, y, ImprintAttack()(noisy, kn))
    assert 30 < blurred.mean_psnr < clean.mean_psnr


def test_active_attacks_refuse_an_honest_first_layer() -> None:
    upd, _ = tiny_honest_update()
    for attack in (ErasureDecodingActive(), ImprintAttack()):
        with pytest.raises(ConfigError, match="imprint layer.*honest first layer"):
            attack(upd, ACTIVE)


def test_erasure_decoding_refuses_fedavg_and_convnets() -> None:
    spec = model_spec("mlp", input_shape=(12,), hidden=[8], out_dim=3)
    params = {k: v.double() for k, v in build_model(spec, seed=0).state_dict().items()}
    x, y = tiny_batch(4, 12, seed=0)
    delta = fedavg_update(spec, params, x, y, local_steps=2, learning_rate=0.1)
    with pytest.raises(ConfigError, match="release.kind.*FedSGD"):
        ErasureDecodingPassive()(delta, Knowledge())
    conv = model_spec("convnet", input_shape=(1, 4, 4), out_dim=3, width=2)
    cparams = {k: v.double() for k, v in build_model(conv, seed=0).state_dict().items()}
    x16 = torch.rand(4, 1, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    upd = fedsgd_update(conv, cparams, x16, y)
    with pytest.raises(ConfigError, match="MLP"):
        ErasureDecodingPassive()(upd, Knowledge())


def test_passive_decoding_certifies_small_batches_on_an_honest_mlp(mnist_pool: Pool) -> None:
    spec, params = trained_mlp(mnist_pool, width=256, steps=0)
    (row,) = passive_cell(mnist_pool, spec, params, 16, [ErasureDecodingPassive()], seed=0)
    assert row["exact_rate"] == 1.0 and row["certified_fraction"] == 1.0
    assert row["false_certificates"] == 0 and row["label_accuracy"] == 1.0


def test_span_decoding_goes_beyond_peeling_on_a_small_mnist_mlp(mnist_pool: Pool) -> None:
    """Fast version of the slow check below: peeling alone stalls, the span decodes and the
    certificate proves the whole batch (through the span reduction for the stalled core)."""
    spec, params = trained_mlp(mnist_pool, width=256, steps=0)
    attacks = [ErasureDecodingPassive(span_search=False), ErasureDecodingPassive()]
    peel, span = passive_cell(mnist_pool, spec, params, 24, attacks, seed=1)
    assert peel["exact_rate"] < 0.5 and span["exact_rate"] == 1.0
    assert span["certified_fraction"] == 1.0 and span["batch_certified"]
    assert span["false_certificates"] == 0 and span["label_accuracy"] == 1.0


def test_span_solve_recovers_a_batch_from_its_codewords() -> None:
    """The span decoder's two steps on a batch no row isolates: single-sample codewords pass
    the next-layer test and a mixture of two does not; the codewords solve the batch."""
    spec = model_spec("mlp", input_shape=(32,), hidden=[64], out_dim=3)
    params = {k: v.double() for k, v in build_model(spec, seed=2).state_dict().items()}
    x, y = tiny_batch(6, 32, seed=5)
    upd = fedsgd_update(spec, params, x, y)
    split = FirstLayerSplit(release_model(upd))
    g = torch.cat([upd.update["layers.0.weight"], upd.update["layers.0.bias"].unsqueeze(1)], 1)
    live = torch.nonzero(g.abs().amax(1) > 0).squeeze(1)
    u, sv, vh = torch.linalg.svd(g[live], full_matrices=False)
    deltas = split.labelled_deltas(x, y)[:, live]
    dec = SpanDecoder(split, params["layers.1.weight"], 1e-9, torch.Generator())
    assert all(dec._is_single(d / d.abs().max(), live) for d in deltas)
    mixed = deltas[0] / deltas[0].abs().max() + deltas[1] / deltas[1].abs().max()
    assert not dec._is_single(mixed / mixed.abs().max(), live)
    state = SpanState(live, u[:, :6], sv[:6], vh[:6], deltas)
    solved = dec.solve(g, state, 6)
    assert float(torch.cdist(solved, x, p=float("inf")).amin(1).max()) < 1e-10


@pytest.mark.slow
def test_span_decoding_goes_beyond_peeling(data_dir: Path) -> None:
    pool = load_pool("mnist", n_public=1000, data_dir=data_dir, limit=3000)
    spec, params = trained_mlp(pool, width=1024, steps=0)
    attacks = [ErasureDecodingPassive(span_search=False), ErasureDecodingPassive()]
    peel, span = passive_cell(pool, spec, params, 64, attacks, seed=0)
    assert peel["exact_rate"] < 0.5 and span["certified_fraction"] == 1.0
    assert span["false_certificates"] == 0 and span["batch_certified"]


def test_idlg_labels_are_exact_for_single_samples() -> None:
    for seed in range(5):
        upd, _ = tiny_honest_update(seed=seed, batch=1)
        _, y = tiny_batch(1, 12, seed)
        assert recover_labels(upd, 1).tolist() == y.tolist()


def test_idlg_and_inverting_gradients_beat_random_guessing() -> None:
    upd, kn = tiny_honest_update(seed=2, batch=1)
    x, y = tiny_batch(1, 12, seed=2)
    guess = Reconstruction(inputs=torch.rand(8, 12, generator=torch.Generator().manual_seed(1)))
    random = score_exact_recovery(x, y, guess)
    ig = InvertingGradients(iterations=150, snapshot_every=50, tv_weight=0.0)(upd, kn)
    idlg = IDLG(iterations=30)(upd, kn)
    assert score_exact_recovery(x, y, idlg).mean_psnr > 40 > random.mean_psnr + 20
    psnrs = [
        score_exact_recovery(x, y, dataclasses.replace(ig, inputs=snap)).mean_psnr
        for _, snap in ig.diagnostics["snapshots"]
    ]
    assert psnrs[-1] > psnrs[0] and psnrs[-1] > 25


def test_norm_clipping_is_a_rescaling_the_decoder_undoes() -> None:
    upd, kn = tiny_malicious_update(batch=6)
    clipped = ClipNorm(1e-3)(upd, torch.Generator())
    rec = ErasureDecodingActive()(clipped, kn)
    x, y = tiny_batch(6, 12, seed=0)
    s = score_exact_recovery(x, y, rec)
    assert rec.diagnostics["batch_certified"] and 0 < rec.diagnostics["update_scale"] < 1e-2
    assert s.exact_rate == 1.0 and s.false_certificates == 0
