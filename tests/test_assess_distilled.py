"""Assessing a user's own distilled data set: loading it from files (with clear errors), and
the verdict on both sides, end to end through ``trainleak assess``: a set distilled from real
training images holds near-copies of them (high risk, beyond public images at equal budget),
a set distilled from noise does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from assess_helpers import assess_cli, runner
from trainleak import cli
from trainleak.audit.assess import RECOVERED_SSIM, assess
from trainleak.audit.assess_scoring import ReferenceSet
from trainleak.errors import MetadataError, SpecMismatchError
from trainleak.releases.distilled import DistilledSet
from trainleak.releases.io import load_release
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.distillation import candidate_specs, split_task
from trainleak.systems.distillation.dm import DMConfig
from trainleak.systems.distillation.run import distill


@pytest.fixture(scope="module")
def digits() -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """300 private digits and 500 disjoint public (auxiliary) digits."""
    task = split_task("digits", 300, 500, 10, seed=0)
    return task.private, task.aux


def _distilled(private: tuple[torch.Tensor, torch.Tensor], init: str) -> DistilledSet:
    spec = candidate_specs(["convnet"], tuple(private[0].shape[1:]), 10)["convnet"]
    cfg = DMConfig(ipc=10, init=init, iterations=200)
    return distill(*private, 10, spec, cfg, seed=0).release


def test_saved_folder_and_spec_file_load_as_the_same_set(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    ds = DistilledSet(
        images=torch.rand(6, 1, 8, 8, generator=gen), labels=torch.arange(6) % 3, num_classes=3
    )
    loaded = load_release(ds.save(tmp_path / "saved"))
    assert loaded.kind == "distilled_set"
    assert torch.equal(loaded.release.images, ds.images)  # type: ignore[union-attr]
    save_file({"x": ds.images, "y": ds.labels}, str(tmp_path / "mine.safetensors"))
    spec = {
        "type": "distilled_set",
        "set": "mine.safetensors",
        "num_classes": 3,
        "value_range": [0.0, 1.0],
        "lr": 0.01,
        "tensor_names": {"images": "x", "labels": "y"},
    }
    (tmp_path / "release.json").write_text(json.dumps(spec))
    own = load_release(tmp_path)
    assert own.release.content_hash() != ds.content_hash()  # the learned lr is part of it
    assert torch.equal(own.release.labels, ds.labels) and own.release.lr == 0.01  # type: ignore[union-attr]


def test_bad_distilled_sets_are_one_error_naming_file_and_field(tmp_path: Path) -> None:
    images = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    base = {"type": "distilled_set", "set": "s.safetensors", "num_classes": 3}
    cases = [
        ({"images": images, "labels": torch.arange(5) % 3}, {}, SpecMismatchError, "labels"),
        ({"images": images * 3, "labels": torch.arange(6) % 3}, {}, SpecMismatchError, "range"),
        ({"images": images}, {}, SpecMismatchError, "no tensor 'labels'"),
        ({"images": images, "labels": torch.arange(6) % 3}, {"num_classes": 1}, MetadataError,
         "num_classes"),
        ({"images": images, "labels": torch.arange(6) % 3}, {"tensor_names": {"w": "x"}},
         MetadataError, "tensor_names"),
    ]  # fmt: skip
    for i, (tensors, extra, error, words) in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        save_file(tensors, str(folder / "s.safetensors"))
        spec = {**base, "value_range": [0.0, 1.0], **extra}
        (folder / "release.json").write_text(json.dumps(spec))
        with pytest.raises(error, match=words) as caught:
            load_release(folder)
        assert "s.safetensors" in str(caught.value) or "release.json" in str(caught.value)


def test_verdict_real_initialised_set_is_high_and_noise_initialised_is_not(
    digits: tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> None:
    private, aux = digits
    know = Knowledge(auxiliary=aux)  # shapes, range and classes come from the release
    ref = ReferenceSet(*private)
    found = {}
    for init in ("real", "noise"):
        a = assess(_distilled(private, init), know, private=ref, attacks=["ira-recovery"])
        run = a.run("ira-recovery")
        assert run.status == "done" and run.scored is not None
        found[init] = (a.card.level, run.scored.finding)
    level, f = found["real"]
    assert f.quality_metric.startswith(f"SSIM >= {RECOVERED_SSIM['distilled_set']:g}")
    assert f.candidates == 100 and f.of == 300
    # Real-initialised: near-copies of training digits, well beyond 100 public digits.
    assert level == "high" and f.recovered >= 2 * (f.baseline_recovered or 0) + 20
    level, f = found["noise"]
    assert level != "high" and f.recovered <= (f.baseline_recovered or 0)


def test_cli_assess_reads_a_saved_distilled_set_with_knowledge_and_reference_files(
    digits: tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    tmp_path: Path,
) -> None:
    private, aux = digits
    folder = _distilled(private, "real").save(tmp_path / "release")
    save_file({"x": aux[0], "y": aux[1]}, str(tmp_path / "public.safetensors"))
    (tmp_path / "knowledge.yaml").write_text(
        "auxiliary: {file: public.safetensors}\nvalue_range: [0.0, 1.0]\n"
    )
    save_file({"x": private[0]}, str(tmp_path / "private.safetensors"))
    listed = runner.invoke(cli.app, ["attacks", "--release", str(folder)])
    assert listed.exit_code == 0 and "ira-recovery" in listed.output
    table, doc = assess_cli(
        folder, tmp_path / "knowledge.yaml", tmp_path / "private.safetensors", tmp_path / "out"
    )
    assert table["ira-recovery"]["status"] == "done"
    assert table["ira-reveal"]["status"] == "needs knowledge"  # no shadow bank in a file
    assert doc["risk"]["level"] == "high"
    assert "images/ira-recovery.png" in doc["artifacts"].values()
