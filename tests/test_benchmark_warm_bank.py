"""The warm-bank timing script (benchmarks/distillation_warm_bank.py): its bank really holds
the shadow sets, whatever the worker count, and its overrides parse as the CLI's do."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from trainleak.experiments.distillation_leakage import shadow_bank_jobs
from trainleak.experiments.distillation_leakage_claims import DistillationLeakageConfig
from trainleak.scenarios.distillation import candidate_specs, split_task

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "distillation_warm_bank.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distillation_warm_bank", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_overrides_read_yaml_values_and_refuse_a_pair_without_a_key() -> None:
    mod = _script()
    got = mod._overrides(["ipc=2", "architectures=[mlp,convnet]", "augment=true"])
    assert got == {"ipc": 2, "architectures": ["mlp", "convnet"], "augment": True}
    for bad in ("ipc", "=2"):
        with pytest.raises(SystemExit, match="key=value"):
            mod._overrides([bad])


@pytest.mark.parametrize("workers", [1, 2])
def test_the_bank_holds_every_shadow_set_with_one_worker_too(tmp_path: Path, workers: int) -> None:
    # prefill leaves a one-worker configuration's sets to their reader, so a bank built through
    # it alone came out empty and the "warm" run distilled its whole bank itself
    cfg = DistillationLeakageConfig(
        n_private=60,
        n_aux=60,
        n_holdout=20,
        algorithms=["dm"],
        architectures=["mlp", "convnet"],
        ipc=1,
        dm_iterations=2,
        shadow_seeds=2,
        workers=workers,
    )
    res = _script().build_bank(tmp_path, cfg)
    task = split_task(cfg.dataset, cfg.n_private, cfg.n_aux, cfg.n_holdout, cfg.seed)
    specs = candidate_specs(list(cfg.architectures), task.input_shape, task.num_classes)
    keys = {job.key() for job in shadow_bank_jobs(cfg, task, specs)}
    assert len(keys) == res["bank_sets"] == res["distilled"] == 4
    assert all((tmp_path / "distillation" / k / "set.json").is_file() for k in keys)
