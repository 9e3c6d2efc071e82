"""The LPIPS formula as a feature map, safe loading of user LPIPS files, the CLI command."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from typer.testing import CliRunner

from trainleak.cli_bound import bound_app
from trainleak.errors import UnsafeFileError
from trainleak.metrics.features import LPIPSFormulaMap, load_lpips_alexnet
from trainleak.metrics.features.lpips_formula import _AlexNetTrunk


class _TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w1 = torch.randn(3, 1, 3, 3, generator=g)
        self.w2 = torch.randn(5, 3, 3, 3, generator=g)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = torch.relu(nn.functional.conv2d(x, self.w1, padding=1))
        return [h, torch.relu(nn.functional.conv2d(h, self.w2, stride=2, padding=1))]


def test_psi_distance_equals_the_lpips_formula() -> None:
    net = _TwoLayers()
    weights = [torch.rand(3), torch.rand(5)]
    fmap = LPIPSFormulaMap(net, weights, name="test")
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(4, 1, 8, 8, generator=g), torch.rand(4, 1, 8, 8, generator=g)
    want = torch.zeros(4, dtype=torch.float64)
    for fx, fy, w in zip(net(x), net(y), weights):
        nx = fx.double() / (fx.double().norm(dim=1, keepdim=True) + 1e-10)
        ny = fy.double() / (fy.double().norm(dim=1, keepdim=True) + 1e-10)
        diff = (w.double().view(1, -1, 1, 1) * (nx - ny)) ** 2
        want += diff.sum(1).mean((1, 2))
    torch.testing.assert_close(fmap.distance(x, y), want)
    assert bool((fmap(x).abs() <= fmap.coordinate_scale() + 1e-12).all())


def test_user_lpips_files_load_safely(tmp_path: Path) -> None:
    trunk = _AlexNetTrunk()
    state = {k: v.contiguous() for k, v in trunk.state_dict().items() if k.startswith("feat")}
    save_file(state, str(tmp_path / "alexnet.safetensors"))
    channels = (64, 192, 384, 256, 256)
    heads = {f"lin{i}.model.1.weight": torch.rand(1, c, 1, 1) for i, c in enumerate(channels)}
    save_file(heads, str(tmp_path / "lin.safetensors"))
    fmap = load_lpips_alexnet(tmp_path / "alexnet.safetensors", tmp_path / "lin.safetensors")
    out = fmap(torch.rand(2, 3, 64, 64))
    assert out.ndim == 2 and bool(torch.isfinite(out).all())
    (tmp_path / "evil.pkl").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(UnsafeFileError, match="pickle"):
        load_lpips_alexnet(tmp_path / "evil.pkl", tmp_path / "lin.safetensors")


def test_cli_bound_dpsgd_runs_and_rejects_bad_input() -> None:
    runner = CliRunner()
    ok = runner.invoke(bound_app, ["dpsgd", "--sampling-rate", "0.05", "--noise-multiplier", "2",
                                   "--steps", "100", "--samples", "400", "--json"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert '"bound"' in ok.output and '"epsilon"' in ok.output
    bad = runner.invoke(bound_app, ["dpsgd", "--sampling-rate", "0", "--noise-multiplier", "1",
                                    "--steps", "10"])  # fmt: skip
    assert bad.exit_code == 2 and "sampling_rate" in bad.output
    bad = runner.invoke(bound_app, ["dpsgd", "--sampling-rate", "0.1", "--noise-multiplier", "1",
                                    "--steps", "10", "--representation", "lpips"])  # fmt: skip
    assert bad.exit_code == 2 and "representation" in bad.output
