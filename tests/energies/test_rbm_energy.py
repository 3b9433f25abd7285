"""RBM energies: free energies and conditionals against the joint energy, by enumeration."""

import torch

from shortrun.energies.rbm import BernoulliRBMParams, GaussianRBMParams
from shortrun.estimators.exact import all_states


def tiny_rbm(nv=4, nh=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return BernoulliRBMParams(torch.randn(nv, nh, generator=g, dtype=torch.float64),
                              torch.randn(nv, generator=g, dtype=torch.float64),
                              torch.randn(nh, generator=g, dtype=torch.float64))


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


def test_an_rbm_is_an_energy_of_its_visible_units():
    """Called on a batch, the RBM object is ``F(v)``: ``(B, D) → (B,)``, usable by any kernel
    that takes an energy callable."""
    p = tiny_rbm()
    v = all_states(4, torch.float64)
    out = p(v)
    assert out.shape == (16,)
    assert torch.equal(out, p.free_energy(v))
