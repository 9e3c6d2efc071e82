"""U-shaped federated split learning: the simulator, the transcript release and its checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from release_fixtures import tiny_split
from trainleak.data import load_digits
from trainleak.errors import ConfigError, ShapeError
from trainleak.models.registry import build_model, model_spec
from trainleak.models.split import SplitSpec, model_depth, part_shapes, split_modules
from trainleak.releases.split_learning import SmashedDefenseSpec, SplitTranscript
from trainleak.defenses.split_learning import KDUFSL
from trainleak.systems.split_learning import UFSLConfig, split_accuracy, train_ufsl

MODEL = model_spec("split_convnet", input_shape=(1, 8, 8), out_dim=10, channels=[4], hidden=[32])
SPLIT = SplitSpec(MODEL, 1, 2, (1, 8, 8))


def test_split_parts_compose_to_the_whole_model() -> None:
    parts = split_modules(SPLIT, seed=3)
    x = torch.rand(5, 1, 8, 8)
    whole = build_model(MODEL, seed=3)
    assert torch.allclose(parts.tail(parts.body(parts.head(x))), whole(x))
    assert part_shapes(SPLIT) == ((4, 8, 8), (32,))
    assert model_depth(MODEL) == 3


def test_split_point_beyond_depth_is_refused() -> None:
    with pytest.raises(ConfigError, match="depth 3"):
        split_modules(SplitSpec(MODEL, 1, 3, (1, 8, 8)))
    with pytest.raises(ConfigError, match="depth 3"):
        split_modules(SplitSpec(MODEL, 2, 7, (1, 8, 8)))
    with pytest.raises(ConfigError, match="head_end"):
        SplitSpec(MODEL, 0, 2, (1, 8, 8))


def test_transcript_records_what_the_server_sees() -> None:
    tr, _, truth = tiny_split()
    assert len(tr) == 180 and tr.n_clients == 3  # the last round: every record once
    assert tuple(tr.smashed.shape[1:]) == (4, 8, 8)
    assert tuple(tr.body_grads.shape) == (180, 32)
    assert [a.round for a in tr.aggregates] == [2, 3]
    assert torch.equal(tr.step_round, torch.full((tr.n_steps,), 2))
    # the transcript rows are the head outputs of the true inputs under the client's local
    # head: close to, not equal to, the aggregated head of the round's start
    head = split_modules(tr.split, head=tr.aggregate(2).head).head
    with torch.no_grad():
        err = (head(truth) - tr.smashed).norm() / tr.smashed.norm()
    assert 0 < float(err) < 0.2
    assert not {"x", "y", "labels", "inputs"} & {f.name for f in dataclasses.fields(tr)}


def test_first_step_is_the_protocol_exactly() -> None:
    """One client, one step from the seeded initial weights: the transcript's smashed rows,
    received and returned gradients are those of head, body and tail on the true batch."""
    ds = load_digits()
    x, y = ds.x[:40], ds.y[:40]
    run = train_ufsl([(x, y)], SPLIT, UFSLConfig(rounds=1, batch_size=40), seed=4)
    tr = run.transcript
    parts = split_modules(SPLIT, seed=4)
    xb, yb = x[run.row_index], y[run.row_index]
    s = parts.head(xb).detach().requires_grad_(True)
    o = parts.body(s)
    o_leaf = o.detach().requires_grad_(True)
    torch.nn.functional.cross_entropy(parts.tail(o_leaf), yb).backward()
    assert o_leaf.grad is not None
    (s_grad,) = torch.autograd.grad(o, s, o_leaf.grad)
    assert torch.allclose(tr.smashed, s.detach(), atol=1e-6)
    assert torch.allclose(tr.body_grads, o_leaf.grad, atol=1e-7)
    assert torch.allclose(tr.smashed_grads, s_grad, atol=1e-7)


def test_save_load_round_trip(tmp_path: Path) -> None:
    tr, _, _ = tiny_split(defense_k=2)
    back = SplitTranscript.load(tr.save(tmp_path / "t"))
    assert torch.equal(back.smashed, tr.smashed)
    assert torch.equal(back.step, tr.step)
    assert back.defense == tr.defense == SmashedDefenseSpec(k=2)
    assert back.split == tr.split
    for a, b in zip(back.aggregates, tr.aggregates, strict=True):
        assert a.round == b.round and all(torch.equal(a.head[k], b.head[k]) for k in a.head)
    with pytest.raises(FileNotFoundError, match="transcript.safetensors is missing"):
        SplitTranscript.load(tmp_path / "missing")


def test_shape_mismatch_with_the_split_is_refused() -> None:
    tr, _, _ = tiny_split()
    with pytest.raises(ShapeError, match=r"smashed.*gives \(180, 4, 8, 8\)"):
        dataclasses.replace(tr, smashed=tr.smashed.reshape(180, -1))
    other = SplitSpec(
        model_spec("split_convnet", input_shape=(1, 8, 8), out_dim=10, channels=[6], hidden=[32]),
        1,
        2,
        (1, 8, 8),
    )
    with pytest.raises(ShapeError, match="declared split"):
        dataclasses.replace(tr, split=other)
    with pytest.raises(ShapeError, match="body_grads"):
        dataclasses.replace(tr, body_grads=tr.body_grads[:, :16])


def test_non_finite_smashed_data_is_refused() -> None:
    tr, _, _ = tiny_split()
    bad = tr.smashed.clone()
    bad[3, 0, 0, 0] = float("nan")
    with pytest.raises(ConfigError, match="smashed.*finite"):
        dataclasses.replace(tr, smashed=bad)
    with pytest.raises(ConfigError, match="smashed"):
        KDUFSL(SmashedDefenseSpec(k=2)).transmit(bad[:10], torch.Generator())


def test_bad_training_input_is_refused() -> None:
    ds = load_digits()
    clients = [(ds.x[:40], ds.y[:40])]
    with pytest.raises(ConfigError, match="'k'.*batch size 16"):
        train_ufsl(clients, SPLIT, UFSLConfig(rounds=1, batch_size=16),
                   defense=KDUFSL(SmashedDefenseSpec(k=32)))
    with pytest.raises(ConfigError, match="clients"):
        train_ufsl([], SPLIT, UFSLConfig(rounds=1))
    with pytest.raises(ConfigError, match="clients\\[0\\]"):
        train_ufsl([(ds.x[:40].reshape(40, 64), ds.y[:40])], SPLIT, UFSLConfig(rounds=1))
    with pytest.raises(ConfigError, match="rounds"):
        UFSLConfig(rounds=0)


def test_training_learns_and_fedavg_weights_by_size() -> None:
    ds = load_digits()
    clients = [(ds.x[:300], ds.y[:300]), (ds.x[300:400], ds.y[300:400])]
    run = train_ufsl(clients, SPLIT, UFSLConfig(rounds=6, batch_size=32), seed=1)
    assert run.losses[-1] < 0.6 * run.losses[0]
    acc = split_accuracy(run.parts, ds.x[1000:1400], ds.y[1000:1400])
    assert acc > 0.7  # chance is 0.1
    assert sorted(run.row_index.tolist()) == list(range(400))
