"""Block-Gibbs kernel and RBM conditionals, checked by exact enumeration."""

import math

import pytest
import torch

from shortrun.estimators.exact import all_states
from shortrun.samplers.gibbs import (
    BernoulliRBMParams,
    GaussianRBMParams,
    block_gibbs,
    hidden_state,
)


def tiny_rbm(nv=4, nh=3, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return BernoulliRBMParams(scale * torch.randn(nv, nh, generator=g, dtype=torch.float64),
                              torch.randn(nv, generator=g, dtype=torch.float64),
                              torch.randn(nh, generator=g, dtype=torch.float64))


def exact_visible_probs(p, beta=1.0):
    V, H = all_states(p.n_visible, torch.float64), all_states(p.n_hidden, torch.float64)
    neg_e = -beta * (-(V @ p.W @ H.T) - (V @ p.b)[:, None] - (H @ p.c)[None])
    return torch.softmax(torch.logsumexp(neg_e, 1), 0), V


def state_index(v):
    return (v.long() * (1 << torch.arange(v.shape[1]))).sum(1)


def test_free_energy_and_conditionals_match_the_joint_energy():
    p = tiny_rbm()
    V, H = all_states(4, torch.float64), all_states(3, torch.float64)
    joint = torch.stack([p.energy(V, h.expand(len(V), -1)) for h in H], 1)   # (16, 8)
    assert torch.allclose(p.free_energy(V), -torch.logsumexp(-joint, 1))
    # p(h_j = 1 | v) from the joint equals the sigmoid conditional
    post = torch.softmax(-joint, 1)
    assert torch.allclose(post @ H, p.hidden_prob(V))
    # tempered free energy: −log Σ_h exp(−β E)
    beta = 0.37
    assert torch.allclose(p.free_energy(V, beta), -torch.logsumexp(-beta * joint, 1))
    per_row = torch.full((len(V),), beta, dtype=torch.float64)
    assert torch.allclose(p.free_energy(V, per_row), p.free_energy(V, beta))


def test_gaussian_free_energy_matches_the_joint_energy():
    g = torch.Generator().manual_seed(1)
    p = GaussianRBMParams(torch.randn(3, 2, generator=g, dtype=torch.float64),
                          torch.randn(3, generator=g, dtype=torch.float64),
                          torch.randn(2, generator=g, dtype=torch.float64),
                          0.3 * torch.randn(3, generator=g, dtype=torch.float64))
    v = torch.randn(5, 3, generator=g, dtype=torch.float64)
    H = all_states(2, torch.float64)
    joint = torch.stack([p.energy(v, h.expand(len(v), -1)) for h in H], 1)
    assert torch.allclose(p.free_energy(v), -torch.logsumexp(-joint, 1))
    assert torch.allclose(torch.softmax(-joint, 1) @ H, p.hidden_prob(v))


def test_gibbs_chains_sample_the_exact_distribution():
    """20,000 independent chains after 30 sweeps vs enumeration. TV between an n-sample
    histogram over K=16 states and the truth has mean ≈ Σ sqrt(p(1-p)/n)·sqrt(2/π)/2 ≈ 0.011
    here; 0.03 is ~3× that, and an un-mixed or wrong kernel is off by > 0.1."""
    p = tiny_rbm(scale=1.5)
    probs, _ = exact_visible_probs(p)
    g = torch.Generator().manual_seed(3)
    n = 20_000
    v0 = torch.zeros(n, 4, dtype=torch.float64)
    out = block_gibbs(p, v0, 30, generator=g)
    hist = torch.bincount(state_index(out.v), minlength=16).double() / n
    expected_tv = 0.5 * float((torch.sqrt(probs * (1 - probs) / n)).sum()) * math.sqrt(2 / math.pi)
    tv = 0.5 * float((hist - probs).abs().sum())
    assert tv < 0.03, (tv, expected_tv)


def test_hidden_state_reuse_and_step_counts():
    p = tiny_rbm()
    v = all_states(4, torch.float64)
    s = hidden_state(p, v)
    assert torch.equal(block_gibbs(p, s, 0).v, v)
    assert torch.allclose(s.h_prob, torch.sigmoid(s.h_input))
    with pytest.raises(ValueError, match="n_steps must be >= 0"):
        block_gibbs(p, v, -1)


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_and_affine_routes_agree_with_float64(onednn, threads, mkldnn_enabled):
    """Every CPU route of the RBM's products (oneDNN, NumPy, torch) gives float32 rounding
    away from the float64 product, for the transposed views the kernel and the update pass."""
    from shortrun.samplers.gibbs import affine, gemm

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
