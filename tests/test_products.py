"""Every CPU route of the no-autograd products (oneDNN, NumPy, torch) agrees with float64."""

import pytest
import torch

from shortrun.products import affine, gemm


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_and_affine_routes_agree_with_float64(onednn, threads, mkldnn_enabled):
    """Every route gives float32 rounding away from the float64 product, for the transposed
    views the Gibbs kernel and the RBM update pass."""
    mkldnn_enabled(onednn)
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(4)
    v = torch.rand(30, 40, generator=g).round()
    W = torch.randn(40, 20, generator=g) * 0.1
    c = torch.randn(20, generator=g)
    h = torch.rand(30, 20, generator=g)
    ref = v.double() @ W.double() + c.double()
    torch.testing.assert_close(affine(v, W, c).double(), ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(affine(h, W.t(), torch.zeros(40)).double(),
                               h.double() @ W.double().t(), rtol=0, atol=1e-5)
    torch.testing.assert_close(gemm(v.t(), h).double(), v.double().t() @ h.double(),
                               rtol=0, atol=1e-5)


def test_float64_and_autograd_inputs_take_the_plain_route():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(6, 4, generator=g, dtype=torch.float64)
    b = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    out = gemm(a, b)
    assert out.requires_grad and torch.allclose(out, a @ b)
