"""The seed identity, on a space small enough to enumerate.

On all 2^10 binary vectors with an MLP energy, p(x) = exp(−E(x))/Z exactly, and
−∇θ mean log p(data) = mean ∇θE(data) − E_p[∇θE].
(1) The contrastive loss with the exact model expectation (weights p over the whole space)
has exactly that gradient (checked against autograd of the exact log-likelihood, 1e-5).
(2) The Monte-Carlo estimate from exact samples agrees within three standard errors along
fixed random directions; the standard error comes from the exact per-state gradients.
"""

import itertools
import math

import torch

from shortrun.energies.mlp import MLPEnergy
from shortrun.objectives.contrastive import contrastive_loss

D = 10


def setup():
    torch.manual_seed(0)
    space = torch.tensor(list(itertools.product([0.0, 1.0], repeat=D)), dtype=torch.float64)
    energy = MLPEnergy(D, hidden=16, depth=2, act="tanh").double()
    data = space[torch.randint(len(space), (64,))]
    return space, energy, data


def flat_grad(loss, params):
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])


def test_exact_expectation_equals_autograd_of_log_likelihood():
    space, energy, data = setup()
    params = list(energy.parameters())
    log_z = torch.logsumexp(-energy(space), 0)
    nll = (energy(data) + log_z).mean()
    expected = flat_grad(nll, params)
    e_all = energy(space)
    p = torch.softmax(-e_all, 0).detach()
    out = contrastive_loss(energy(data), e_all, weights_neg=p)
    torch.testing.assert_close(flat_grad(out.loss, params), expected, rtol=1e-5, atol=1e-7)


def test_monte_carlo_negative_phase_within_three_standard_errors():
    space, energy, data = setup()
    params = list(energy.parameters())
    jac = torch.stack([flat_grad(energy(space[i : i + 1]).sum(), params)
                       for i in range(len(space))])  # per-state ∇θE, (2^D, P)
    p = torch.softmax(-energy(space), 0).detach()
    exact = p @ jac
    n = 20_000
    idx = torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(1))
    out = contrastive_loss(energy(data), energy(space[idx]))
    mc = flat_grad(out.loss, params)
    pos = flat_grad(energy(data).mean(), params)
    directions = torch.randn(5, len(exact), generator=torch.Generator().manual_seed(2),
                             dtype=torch.float64)
    for u in directions:
        proj = jac @ u
        sd = math.sqrt(float(p @ (proj - p @ proj) ** 2))
        se = sd / math.sqrt(n)
        estimate = float((pos - mc) @ u)  # the MC negative phase E_p[∇E]·u
        assert abs(estimate - float(exact @ u)) < 3 * se, (estimate, float(exact @ u), se)
