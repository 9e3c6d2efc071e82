"""A classifier trained in plain PyTorch, described by a ``"type": "classifier"`` spec, with
the adversary's prior trained by ``trainleak prior`` on public images of other classes, then
assessed, as a user would do it: digits 0-4 are the private classes, 5-9 the public images.
Bad specs and bad public files are one error naming the file and the field."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from assess_helpers import assess_cli, runner
from trainleak import cli
from trainleak.data import load_digits
from trainleak.errors import MetadataError, SpecMismatchError
from trainleak.releases.classifier import GenerativePrior
from trainleak.releases.io import load_release

KEYS = {"layers.0.weight": "1.weight", "layers.0.bias": "1.bias",
        "layers.1.weight": "3.weight", "layers.1.bias": "3.bias",
        "layers.2.weight": "5.weight", "layers.2.bias": "5.bias"}  # fmt: skip


@lru_cache(maxsize=1)
def _trained() -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plain PyTorch: an MLP on 700 private digits 0-4 (Adam, 300 steps); public digits 5-9."""
    ds = load_digits()
    priv = ds.y < 5
    x, y = ds.x[priv][:700], ds.y[priv][:700]
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        idx = torch.randperm(len(x), generator=gen)[:128]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return state, x, y, ds.x[~priv]


def _spec(**changes: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "type": "classifier",
        "architecture": {"kind": "mlp", "kwargs": {"input_shape": [1, 8, 8], "hidden": [64, 64],
                                                   "out_dim": 5}},
        "weights": "weights.safetensors",
        "tensor_names": KEYS,
        "classes": ["zero", "one", "two", "three", "four"],
        "input_shape": [1, 8, 8],
        "value_range": [0.0, 1.0],
    }  # fmt: skip
    spec.update(changes)
    return spec


def _write(folder: Path, spec: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file(_trained()[0], str(folder / "weights.safetensors"))
    (folder / "release.json").write_text(json.dumps(spec))
    return folder / "release.json"


def test_spec_loads_the_plain_pytorch_weights_as_the_same_function(tmp_path: Path) -> None:
    loaded = load_release(_write(tmp_path, _spec()))
    assert loaded.kind == "classifier"
    state, x, _, _ = _trained()
    mine = nn.Sequential(
        nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5)
    )
    mine.load_state_dict(state)
    with torch.no_grad():
        theirs = loaded.release.model()(x[:50])  # type: ignore[union-attr]
        assert torch.allclose(theirs, mine(x[:50]), atol=1e-6)


@pytest.mark.parametrize(
    ("changes", "error", "field"),
    [
        ({"classes": ["a", "b", "c", "d"]}, MetadataError, "release.json: classes: the classifier"),
        ({"input_shape": [1, 9, 9]}, MetadataError, "cannot take inputs of shape (1, 9, 9)"),
        ({"input_shape": [1, 8]}, MetadataError, "input_shape"),
        ({"classes": ["only"]}, MetadataError, "classes"),
        ({"tensor_names": {"layers.0.weight": "9.weight"}}, SpecMismatchError, "9.weight"),
        ({"architecture": {"kind": "mlp", "kwargs": {"input_shape": [1, 8, 8], "hidden": [32],
                                                     "out_dim": 5}}}, SpecMismatchError,
         "weights.safetensors: layers.2.bias: not a tensor of architecture 'mlp'"),
        ({"value_range": [1.0, 0.0]}, MetadataError, "release.json: value_range"),
        ({"colours": 3}, MetadataError, "colours"),
    ],
)  # fmt: skip
def test_bad_classifier_specs_name_the_field(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], field: str
) -> None:
    path = _write(tmp_path, _spec(**changes))
    with pytest.raises(error) as info:
        load_release(path)
    assert field in str(info.value), str(info.value)


def test_prior_command_then_assess_finds_the_private_classes(tmp_path: Path) -> None:
    state, x, y, public = _trained()
    release = _write(tmp_path / "release", _spec())
    save_file({"images": public}, str(tmp_path / "public.safetensors"))
    res = runner.invoke(
        cli.app,
        ["prior", "--public", str(tmp_path / "public.safetensors"), "--tensor", "images",
         "--out", str(tmp_path / "prior"), "--steps", "800", "--latent-dim", "8",
         *[a for c in "56789" for a in ("--class", c)]],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (tmp_path / "knowledge.yaml").write_text("generative_prior: prior\n")
    save_file({"x": x, "y": y}, str(tmp_path / "private.safetensors"))
    table, doc = assess_cli(
        release, tmp_path / "knowledge.yaml", tmp_path / "private.safetensors", tmp_path / "out"
    )
    ada = table["mi-adaptive"]
    assert ada["of"] == 5 and ada["recovered"] > ada["baseline recovered"], ada
    assert doc["risk"]["level"] == "high"
    assert "private classes" in doc["risk"]["verdict"]
    # the comparison is with a chance quantile, not an equal-budget attack, and says so
    assert "chance (its 95% quantile, as the rule says): 2" in doc["risk"]["verdict"]
    assert "same budget" not in doc["risk"]["verdict"]


@pytest.mark.parametrize(
    ("tensors", "args", "message"),
    [
        ({"x": torch.rand(10, 1, 8, 8)}, ["--tensor", "images"], "no tensor 'images'"),
        ({"x": torch.rand(10, 64)}, [], "(N, C, H, W)"),
        ({"x": torch.rand(10, 1, 8, 8) * 2}, [], "outside the value range"),
        ({"x": torch.full((10, 1, 8, 8), float("nan"))}, [], "NaN"),
        ({"x": torch.rand(10, 1, 8, 8)}, ["--low", "1", "--high", "0"], "value_range"),
    ],
)
def test_prior_command_refuses_bad_public_images(
    tmp_path: Path, tensors: dict[str, torch.Tensor], args: list[str], message: str
) -> None:
    save_file(tensors, str(tmp_path / "public.safetensors"))
    res = runner.invoke(
        cli.app,
        ["prior", "--public", str(tmp_path / "public.safetensors"), "--out",
         str(tmp_path / "prior"), "--steps", "5", *args],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert message in res.output and "public.safetensors" in res.output, res.output
    assert not (tmp_path / "prior").exists()


def test_prior_command_trains_a_gan_and_refuses_an_unknown_kind(tmp_path: Path) -> None:
    save_file({"x": torch.rand(40, 1, 8, 8)}, str(tmp_path / "public.safetensors"))
    base = ["prior", "--public", str(tmp_path / "public.safetensors"), "--steps", "5"]
    res = runner.invoke(cli.app, [*base, "--out", str(tmp_path / "gan"), "--kind", "gan",
                                  "--channels", "16"])  # fmt: skip
    assert res.exit_code == 0, res.output
    prior = GenerativePrior.load(tmp_path / "gan")
    assert prior.spec.kind == "vae_conv_decoder" and prior.spec.kwargs["channels"] == 16
    res = runner.invoke(cli.app, [*base, "--out", str(tmp_path / "flow"), "--kind", "flow"])
    assert res.exit_code == 2 and "kind" in res.output, res.output
    assert not (tmp_path / "flow").exists()
