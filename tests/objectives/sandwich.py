"""Standard errors of an M-estimator, for tolerances of fits with a closed-form answer.

For ``θ̂ = argmin mean_k ℓ_k(θ)`` over ``K`` independent groups, ``θ̂ − θ* ≈ −H⁻¹ ḡ`` with
``H`` the Hessian of the mean loss and ``ḡ`` the mean group gradient at the optimum, so
``Cov θ̂ ≈ H⁻¹ (Cov g_k / K) H⁻¹`` (the sandwich, Huber 1967). Groups (batch means) make the
per-group terms independent even when one example contributes several draws.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def sandwich_se(group_losses: Callable[[torch.Tensor], torch.Tensor],
                theta: torch.Tensor,
                total: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Per-coordinate standard errors of the minimiser at ``theta`` (flat, float64);
    ``group_losses(theta)`` returns the ``(K,)`` loss of each independent group, ``total`` (if
    given) their mean in one cheaper call."""
    theta = theta.detach().clone().requires_grad_(True)
    losses = group_losses(theta)
    k = losses.shape[0]
    grads = torch.stack([torch.autograd.grad(losses[i], theta, retain_graph=True)[0]
                         for i in range(k)])
    total = total or (lambda t: group_losses(t).mean())
    hess = torch.autograd.functional.hessian(total, theta.detach())
    cov_g = torch.cov(grads.T).reshape(theta.numel(), theta.numel()) / k
    h_inv = torch.linalg.inv(hess)
    return (h_inv @ cov_g @ h_inv).diagonal().sqrt()


def minimise(loss: Callable[[torch.Tensor], torch.Tensor], theta0: torch.Tensor,
             iters: int = 60) -> torch.Tensor:
    """L-BFGS on a deterministic loss of a flat float64 parameter vector."""
    theta = theta0.detach().clone().requires_grad_(True)
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=iters, tolerance_grad=1e-12,
                            tolerance_change=1e-15, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = loss(theta)
        value.backward()
        return value

    opt.step(closure)
    return theta.detach()
