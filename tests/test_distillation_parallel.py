"""Distillations spread over worker processes (``scenarios.distillation_bank.prefill``): the
sets the workers write are the sets this process would distil, nothing is distilled twice,
and a worker's error reaches the caller; a run's CPU time counts its workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainleak.data import load_digits
from trainleak.models.registry import model_spec
from trainleak.parallel import cpu_times
from trainleak.scenarios.distillation_bank import DistillJob, build_shadow_bank, prefill
from trainleak.systems.distillation import DMConfig, MTTConfig


def _jobs() -> list[DistillJob]:
    ds = load_digits()
    x, y = ds.x[:200], ds.y[:200]
    spec = model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=10)
    dm = DMConfig(ipc=1, iterations=15)
    mtt = MTTConfig(
        ipc=1,
        iterations=3,
        n_experts=1,
        expert_epochs=2,
        max_start_epoch=0,
        syn_steps=3,
        expert_steps=1,
    )
    return [
        DistillJob(x, y, 10, spec, dm, 0),
        DistillJob(x, y, 10, spec, dm, 1),
        DistillJob(x, y, 10, spec, mtt, 0),
    ]


def test_workers_write_the_sets_this_process_distils(tmp_path: Path) -> None:
    jobs = _jobs()
    # a duplicate job is distilled once
    assert prefill([*jobs, jobs[0]], tmp_path, workers=2) == 3
    assert len(list(tmp_path.iterdir())) == 3
    assert prefill(jobs, tmp_path, workers=2) == 0  # all cached now
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers run
    try:
        for job in jobs:
            mine = job.run(None)  # distilled here, no cache
            theirs = job.run(tmp_path)  # read from what the workers wrote
            assert torch.equal(mine.release.images, theirs.release.images)
            assert torch.equal(mine.release.labels, theirs.release.labels)
            assert mine.release.lr == theirs.release.lr
            if mine.init_indices is not None:
                assert theirs.init_indices is not None
                assert torch.equal(mine.init_indices, theirs.init_indices)
    finally:
        torch.set_num_threads(threads)


def test_one_worker_leaves_the_distilling_to_the_caller(tmp_path: Path) -> None:
    assert prefill(_jobs(), tmp_path, workers=1) == 0
    assert not list(tmp_path.iterdir())


def test_a_worker_error_reaches_the_caller(tmp_path: Path) -> None:
    good = _jobs()[0]
    # an MLP for 28 x 28 inputs cannot take the 8 x 8 digits
    bad = DistillJob(
        good.x,
        good.y,
        10,
        model_spec("mlp", input_shape=(1, 28, 28), hidden=[32], out_dim=10),
        good.config,
        0,
    )
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        prefill([bad, good], tmp_path, workers=2)


def test_the_bank_built_by_workers_equals_the_bank_built_here(tmp_path: Path) -> None:
    ds = load_digits()
    aux = (ds.x[:300], ds.y[:300])
    specs = {"mlp": model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=10)}
    configs = {"dm": DMConfig(ipc=1, iterations=10)}
    par = build_shadow_bank(aux, 10, configs, specs, [0, 1], cache_dir=tmp_path, workers=2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seq = build_shadow_bank(aux, 10, configs, specs, [0, 1], cache_dir=None)
    finally:
        torch.set_num_threads(threads)
    assert [(s.algorithm, s.architecture, s.seed) for s in par.sets] == [
        (s.algorithm, s.architecture, s.seed) for s in seq.sets
    ]
    for a, b in zip(par.sets, seq.sets):
        assert torch.equal(a.release.images, b.release.images)
        assert torch.equal(a.info["init_source"], b.info["init_source"])  # type: ignore[arg-type]


def test_cpu_times_count_the_child_processes_a_run_waited_for() -> None:
    # a run's reported CPU must include its workers: a child that burns 0.5 s of CPU shows up
    # in the children's share, not in this process's own
    own0, kids0 = cpu_times()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    own1, kids1 = cpu_times()
    assert kids1 - kids0 >= 0.45, (kids0, kids1)
    assert own1 - own0 < 0.4, (own0, own1)
