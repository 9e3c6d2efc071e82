"""The matrix-product 2x2 average pool against ``avg_pool2d``: values, gradients, the double
backward trajectory matching takes, ``torch.func`` transforms, and the ConvNet built on it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import grad, vmap

from trainleak.models.convnet import ConvNet
from trainleak.models.pooling import AvgPool2x2, avg_pool_2x2


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 5),
    c=st.integers(1, 4),
    h=st.integers(2, 12),  # avg_pool2d itself rejects an output of size 0
    w=st.integers(2, 12),
    seed=st.integers(0, 2**16),
)
def test_matches_avg_pool2d_on_any_shape_even_or_odd(n: int, c: int, h: int, w: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    for dtype, tol in ((torch.float64, 1e-15), (torch.float32, 1e-6)):
        x = torch.randn(n, c, h, w, generator=g, dtype=dtype) * 10
        ref = F.avg_pool2d(x, 2)
        out = avg_pool_2x2(x)
        assert out.shape == ref.shape
        assert out.dtype == dtype
        assert torch.allclose(out, ref, rtol=0, atol=tol * float(x.abs().max()))


def test_non_contiguous_input_pools_the_same_values():
    x = torch.randn(3, 8, 6, 4, dtype=torch.float64).permute(0, 3, 1, 2)  # (3, 4, 8, 6), strided
    assert not x.is_contiguous()
    assert torch.allclose(avg_pool_2x2(x), F.avg_pool2d(x, 2), rtol=0, atol=1e-14)


def test_first_and_second_derivatives_match_avg_pool2d():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, generator=g, requires_grad=True)

    def second(pool):  # d/dx of (d/dw of a loss), as trajectory matching differentiates
        y = pool(x * w.view(1, -1, 1, 1))
        (gw,) = torch.autograd.grad((y**3).sum(), w, create_graph=True)
        (gx,) = torch.autograd.grad((gw**2).sum(), x)
        return gw.detach(), gx

    gw_ref, gx_ref = second(lambda t: F.avg_pool2d(t, 2))
    gw, gx = second(avg_pool_2x2)
    assert torch.allclose(gw, gw_ref, rtol=1e-12, atol=1e-12)
    assert torch.allclose(gx, gx_ref, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(avg_pool_2x2, (x,))
    assert torch.autograd.gradgradcheck(avg_pool_2x2, (x,))


def test_per_example_gradients_under_vmap_match_a_loop():
    net = ConvNet((1, 8, 8), 4, width=3).double()
    params = {k: v.detach() for k, v in net.named_parameters()}
    g = torch.Generator().manual_seed(1)
    xb = torch.randn(5, 2, 1, 8, 8, dtype=torch.float64, generator=g)  # 5 groups of 2 images
    yb = torch.randint(4, (5, 2), generator=g)

    def loss(p, xc, yc):
        return F.cross_entropy(torch.func.functional_call(net, p, (xc,)), yc)

    batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, xb, yb)
    for i in range(5):
        one = grad(loss)(params, xb[i], yb[i])
        for k in params:
            assert torch.allclose(batched[k][i], one[k], rtol=1e-12, atol=1e-14)


def test_convnet_keeps_its_state_dict_and_its_homogeneity():
    net = ConvNet((1, 8, 8), 10, width=4, bias=False).double()
    assert sum(isinstance(m, AvgPool2x2) for m in net.modules()) == 2
    assert list(net.state_dict()) == ["features.0.weight", "features.3.weight", "head.weight"]
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    # bias-free with ReLU and average pooling: f(a x) = a f(x) for a > 0
    assert torch.allclose(net(3.0 * x), 3.0 * net(x), rtol=1e-12, atol=1e-12)
    # the same network with torch's pooling module gives the same outputs
    ref = ConvNet((1, 8, 8), 10, width=4, bias=False).double()
    ref.load_state_dict(net.state_dict())
    ref.features[2] = torch.nn.AvgPool2d(2)
    ref.features[5] = torch.nn.AvgPool2d(2)
    assert torch.allclose(net(x), ref(x), rtol=0, atol=1e-14)


def test_fit_trains_exactly_as_the_per_parameter_sgd_loop():
    """``fit`` uses foreach SGD for speed; the parameters must equal those of torch's
    per-parameter loop (momentum, weight decay, the rate drop half way) bit for bit."""
    from trainleak.models.fitting import fit

    g = torch.Generator().manual_seed(3)
    x = torch.rand(40, 1, 8, 8, generator=g)
    y = torch.randint(10, (40,), generator=g)
    net = ConvNet((1, 8, 8), 10, width=4, norm=True)
    ref = ConvNet((1, 8, 8), 10, width=4, norm=True)
    ref.load_state_dict(net.state_dict())
    start = {k: v.clone() for k, v in net.state_dict().items()}
    fit(net, x, y, steps=30, lr=0.05, generator=torch.Generator().manual_seed(0), batch_size=16)

    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, foreach=False)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [15], 0.1)
    for _ in range(30):
        idx = torch.randperm(40, generator=gen)[:16]
        loss = F.cross_entropy(ref(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    for (name, a), b in zip(net.state_dict().items(), ref.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
        assert not torch.equal(a, start[name]), f"{name} did not train"


def test_a_first_call_under_inference_mode_does_not_break_training_later():
    from trainleak.models import pooling

    pooling._MATRICES.clear()
    with torch.inference_mode():
        avg_pool_2x2(torch.randn(2, 3, 6, 10))  # the (20, 5) matrix is made here
    x = torch.randn(2, 3, 6, 10, requires_grad=True)
    avg_pool_2x2(x).sum().backward()  # and saved for this backward
    assert torch.allclose(x.grad, torch.full_like(x, 0.25))
