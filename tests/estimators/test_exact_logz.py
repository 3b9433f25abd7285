"""Exact log Z by enumerating the smaller layer vs brute force over both layers."""

import math

import pytest
import torch

from shortrun.energies.rbm import BernoulliRBMParams, GaussianRBMParams
from shortrun.estimators.exact import all_states, log_partition


def brute_force_log_z(p):
    V, H = all_states(p.n_visible, torch.float64), all_states(p.n_hidden, torch.float64)
    W, b, c = p.W.double(), p.b.double(), p.c.double()
    neg_e = V @ W @ H.T + (V @ b)[:, None] + (H @ c)[None]
    return float(torch.logsumexp(neg_e.reshape(-1), 0))


def rbm(nv, nh, seed=0, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return BernoulliRBMParams(scale * torch.randn(nv, nh, generator=g, dtype=dtype),
                              torch.randn(nv, generator=g, dtype=dtype),
                              torch.randn(nh, generator=g, dtype=dtype))


@pytest.mark.parametrize("nv,nh", [(7, 4), (4, 7), (6, 6), (12, 3)])
def test_exact_equals_brute_force_over_both_layers(nv, nh):
    p = rbm(nv, nh, seed=nv * 10 + nh, scale=2.0)
    ref = brute_force_log_z(p)
    assert log_partition(p, torch.float64) == pytest.approx(ref, abs=1e-10)
    # float32 enumeration, and the hi/lo bit split with tiny chunks, agree to float32 precision
    p32 = BernoulliRBMParams(p.W.float(), p.b.float(), p.c.float())
    assert log_partition(p32, lo_bits=2, chunk_elems=64) == pytest.approx(ref, rel=1e-6)


def test_huge_inputs_take_the_softplus_path_and_stay_exact():
    """Inputs beyond ±80 would overflow the tabulated-exponential path; the softplus path
    takes over and still matches brute force."""
    p = rbm(6, 5, seed=3, scale=40.0)
    ref = brute_force_log_z(p)
    p32 = BernoulliRBMParams(p.W.float(), p.b.float(), p.c.float())
    assert log_partition(p32, lo_bits=2) == pytest.approx(ref, rel=1e-6)
    assert log_partition(p, torch.float64) == pytest.approx(ref, abs=1e-9)


def test_wide_layers_enumerate_the_smaller_one():
    """784 × 10: only the hidden layer (1,024 states) is enumerable; a check against float64
    of the same enumeration, and against a second split of the bits."""
    p = rbm(784, 10, seed=1, scale=0.1)
    p.b -= 1.0
    ref = log_partition(p, torch.float64)
    p32 = BernoulliRBMParams(p.W.float(), p.b.float(), p.c.float())
    assert log_partition(p32) == pytest.approx(ref, rel=1e-6)
    assert log_partition(p32, lo_bits=3) == pytest.approx(ref, rel=1e-6)


def test_gaussian_log_z_against_numerical_integration():
    """2 Gaussian visible × 3 hidden: Σ_h ∫ exp(−E(v, h)) dv on a fine grid (the integrand is a
    Gaussian bump well inside the box; the midpoint rule error is far below 1e-6)."""
    g = torch.Generator().manual_seed(0)
    p = GaussianRBMParams(0.5 * torch.randn(2, 3, generator=g, dtype=torch.float64),
                          torch.randn(2, generator=g, dtype=torch.float64),
                          torch.randn(3, generator=g, dtype=torch.float64),
                          torch.tensor([-0.5, 0.3], dtype=torch.float64))
    n, half = 1200, 12.0
    step = 2 * half / n
    axis = -half + step * (torch.arange(n, dtype=torch.float64) + 0.5)
    v = torch.cartesian_prod(axis, axis)
    numeric = float(torch.logsumexp(-p.free_energy(v), 0)) + 2 * math.log(step)
    assert log_partition(p, torch.float64) == pytest.approx(numeric, abs=1e-6)


def test_too_many_states_is_refused_with_the_reason():
    p = BernoulliRBMParams(torch.zeros(40, 33), torch.zeros(40), torch.zeros(33))
    with pytest.raises(ValueError, match=r"2\^33 states; the limit is 2\^32"):
        log_partition(p)


def test_all_states_order():
    s = all_states(3)
    assert s.tolist()[:4] == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]
    assert s.shape == (8, 3)


def test_the_softplus_path_in_float32_matches_brute_force():
    """Large inputs take the softplus branch of the enumeration (public ``F.softplus``: the
    project reads no private torch name)."""
    p = rbm(6, 5, seed=3, scale=40.0)
    ref = brute_force_log_z(p)
    p32 = BernoulliRBMParams(p.W.float(), p.b.float(), p.c.float())
    assert log_partition(p32, lo_bits=2) == pytest.approx(ref, rel=1e-6)
    assert log_partition(p, torch.float64) == pytest.approx(ref, abs=1e-9)
