"""Seed 6: the exact-unlearning server, identification, deletion inversion, failure modes."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from release_fixtures import tiny_broadcast_log
from trainleak.attacks.unlearning.broadcast import BroadcastDeletionAttack
from trainleak.attacks.unlearning.identify import identify_state, recover_summary
from trainleak.attacks.unlearning.probing import (
    identify_before,
    minimal_probe_count,
    plan_unrestricted,
)
from trainleak.defenses.probe_detection import detectability
from trainleak.errors import ConfigError, ShapeError
from trainleak.releases.unlearning import SummaryMessage
from trainleak.scenarios.probing_client import ProbingClient
from trainleak.systems.unlearning import (
    ExactUnlearningServer,
    IllConditionedWarning,
    SingularStatisticsError,
)


def _digits_server(
    n: int = 200, seed: int = 0
) -> tuple[ExactUnlearningServer, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    p = np.random.default_rng(seed).permutation(len(y))
    server = ExactUnlearningServer(dim=64, n_classes=10, lam=1.0)
    server.add("honest", torch.from_numpy(x[p[:n]]), torch.from_numpy(y[p[:n]]))
    return server, x[p[n : n + 300]], y[p[n : n + 300]]


def test_head_equals_retraining_after_deletion() -> None:
    server, x, y = _digits_server(50)
    ids = server.record_ids("honest")
    server.delete("honest", ids[:5])
    keep = np.stack([server.record(i)[0] for i in ids[5:]])
    Y = np.eye(10)[[server.record(i)[1] for i in ids[5:]]]
    W = np.linalg.solve(keep.T @ keep + np.eye(64), keep.T @ Y)
    assert np.abs(server.events[-1].head - W).max() < 1e-10


@pytest.mark.parametrize("kind", ["unrestricted", "own_data"])
def test_float64_exact_recovery_both_probe_types(kind: str) -> None:
    server, x, y = _digits_server()
    client = ProbingClient("mallory", kind, x, y)  # type: ignore[arg-type]
    truth = []
    for rid in server.record_ids("honest")[:3]:
        client.probe(server)
        truth.append(server.record(rid))
        server.delete("honest", [rid])
    rec = BroadcastDeletionAttack(prior_lam=1.0)(server.log_for("mallory"))
    assert rec.labels is not None
    assert rec.labels.tolist() == [t[1] for t in truth]
    err = max(float(np.abs(p - t[0]).max()) for p, t in zip(rec.inputs.numpy(), truth))
    assert err < 1e-8


def test_minimal_unrestricted_probe_set_reaches_full_rank_and_fewer_do_not() -> None:
    server, _, _ = _digits_server()
    assert (
        minimal_probe_count(64, 10)
        == math.ceil(64 / 10)
        == len(plan_unrestricted(64, 10, scale=1.0, seed=0))
    )
    client = ProbingClient("m", "unrestricted")
    client.probe(server, revert=False)
    log = server.log_for("m")
    server.delete("honest", server.record_ids("honest")[:1])
    full = identify_before(server.log_for("m"), len(server.events) - 1, prior_lam=1.0)
    assert full.rank == 64 and full.identified
    heads = [log.heads[k].numpy() for k in range(1, 7)]  # base + first 5 probes: 50 directions
    dBs = [np.zeros((64, 10))]
    for m in log.own[2:7]:
        assert m is not None
        dBs.append(dBs[-1] + m.dB.numpy())
    part = identify_state(heads, [np.zeros((64, 64))] * 6, dBs)
    assert part.rank == 50 and not part.identified


def test_low_precision_breaks_exactness_and_is_not_certified() -> None:
    log64, truth = tiny_broadcast_log(dim=12, n_classes=4, deletions=3)
    log16, _ = tiny_broadcast_log(dim=12, n_classes=4, deletions=3, precision="float16")
    r64 = BroadcastDeletionAttack()(log64)
    r16 = BroadcastDeletionAttack()(log16)
    e64 = max(float(np.abs(p - t[0]).max()) for p, t in zip(r64.inputs.numpy(), truth))
    e16 = max(float(np.abs(p - t[0]).max()) for p, t in zip(r16.inputs.numpy(), truth))
    assert e64 < 1e-10 < 1e-4 < e16
    assert r64.certified is not None and bool(r64.certified.all())
    assert r16.certified is not None and not bool(r16.certified.any())


def test_one_class_own_data_is_rank_deficient() -> None:
    server, x, y = _digits_server()
    one = y == 3
    client = ProbingClient("m", "own_data", x[one], y[one])
    client.probe(server)
    server.delete("honest", server.record_ids("honest")[:1])
    est = identify_before(server.log_for("m"), len(server.events) - 1)
    assert est.rank < 64 and not est.identified


def test_client_summary_from_two_identified_states() -> None:
    server, _, _ = _digits_server()
    client = ProbingClient("m", "unrestricted")
    gone = server.record_ids("honest")[:1]
    client.probe(server)
    client.probe(server)  # a second run is harmless: reverted
    before_A, before_B = server.A.copy(), server.B.copy()
    phi, label = server.record(gone[0])
    server.delete("honest", gone)
    client.probe(server)
    server.delete("honest", server.record_ids("honest")[:1])
    log = server.log_for("m")
    deletes = log.deletions()
    s0 = identify_before(log, deletes[0], prior_lam=1.0)
    s1 = identify_before(log, deletes[1], prior_lam=1.0)
    assert np.abs(s0.A - before_A).max() < 1e-8 and np.abs(s0.B - before_B).max() < 1e-8
    summary = recover_summary(s0, s1)
    assert summary.rank == 1
    assert np.abs(summary.phis[0] - phi).max() < 1e-6
    assert np.abs(summary.dB[:, label] - phi).max() < 1e-6  # the class summary of the deletion


def test_detectability_flags_unrestricted_not_own_batches() -> None:
    rng = np.random.default_rng(0)
    honest = [
        SummaryMessage.records(
            torch.from_numpy(rng.random((5, 8))), torch.from_numpy(rng.integers(0, 3, 5)), 3
        )
        for _ in range(30)
    ]
    own = [
        SummaryMessage.records(
            torch.from_numpy(rng.random((5, 8))), torch.from_numpy(rng.integers(0, 3, 5)), 3
        )
        for _ in range(10)
    ]
    unr = plan_unrestricted(8, 3, scale=1.0, seed=0)
    assert detectability(unr, honest)["flag_rate"] == 1.0
    assert detectability(own, honest)["flag_rate"] <= 0.2


def test_bad_input_errors_name_the_problem() -> None:
    server = ExactUnlearningServer(dim=4, n_classes=2, lam=1.0)
    with pytest.raises(ShapeError, match=r"\(r, 4\)"):
        server.add("a", torch.zeros(2, 5), torch.tensor([0, 1]))
    ids = server.add("a", torch.eye(4), torch.tensor([0, 1, 0, 1]))
    with pytest.raises(ConfigError, match="'ids'"):
        server.delete("b", ids[:1])  # another client's record
    server.delete("a", ids[:1])
    with pytest.raises(ConfigError, match="'ids'"):
        server.delete("a", ids[:1])  # already deleted
    with pytest.raises(ConfigError, match="'precision'"):
        ExactUnlearningServer(dim=4, n_classes=2, precision="bfloat8")
    with pytest.raises(SingularStatisticsError, match="not positive definite"):
        server.submit(
            "a",
            SummaryMessage(
                torch.eye(4, dtype=torch.float64),
                -2 * torch.ones(4, dtype=torch.float64),
                torch.zeros(4, 2, dtype=torch.float64),
            ),
        )
    assert np.allclose(server.A, np.eye(4) + np.diag([0, 1, 1, 1]))  # rejected change rolled back
    with pytest.raises(SingularStatisticsError):
        ExactUnlearningServer(dim=3, n_classes=2, lam=0.0).add(
            "a", torch.ones(1, 3), torch.tensor([0])
        )


def test_ill_conditioned_statistics_warn() -> None:
    server = ExactUnlearningServer(dim=2, n_classes=2, lam=1e-9, cond_warn=1e6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        server.add("a", torch.tensor([[1e3, 0.0]], dtype=torch.float64), torch.tensor([0]))
    assert any(issubclass(w.category, IllConditionedWarning) for w in caught)


def test_attack_refuses_log_without_deletions() -> None:
    server = ExactUnlearningServer(dim=3, n_classes=2)
    server.add("a", torch.eye(3), torch.tensor([0, 1, 0]))
    with pytest.raises(ShapeError, match="no foreign deletion"):
        BroadcastDeletionAttack()(server.log_for("m"))


@pytest.mark.slow
def test_experiment_runs_small_config() -> None:
    from trainleak.experiments import get_experiment

    exp = get_experiment("unlearning-broadcast-leak")
    cfg = exp.make_config(
        {"n_server": 150, "n_own": 200, "deletions": 2, "mnist_deletions": 0,
         "precisions": ["float64", "float16"], "concurrency": [0.3]}
    )  # fmt: skip
    result = exp.run(cfg)
    fp64 = [
        r for r in result.tables["settings"] if r["precision"] == "float64" and r["concurrent"] == 0
    ]
    assert all(r["label_acc"] == 1.0 for r in fp64 if r["diversity"] == "all")
    assert result.claims and all(c.evidence for c in result.claims)
    assert result.risk is not None and result.risk.level == "high"  # float64: exact
    with pytest.raises(ConfigError, match="n_server"):
        exp.make_config({"n_server": 1})
