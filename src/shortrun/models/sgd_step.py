"""``torch.optim.SGD.step()`` for small closed-form updates, without the per-call overhead.

The RBMs write their closed-form gradient into ``p.grad`` and step a plain torch SGD
(momentum, weight decay on ``W``). For ``rbm_digits`` (64×20 weights) the arithmetic is a few
microseconds, while ``SGD.step`` costs far more in bookkeeping (profiler record, grad-mode
switch, hooks, the LR scheduler's wrapper, ``_init_group``, the foreach/fused default check).
:func:`sgd_step` applies the same tensor ops, in the same order and with the same scalars, as
torch's single-tensor SGD (``torch/optim/sgd.py``, ``_single_tensor_sgd``), reading
``lr``/``momentum``/... from ``param_groups`` and keeping the momentum buffers in
``optimizer.state`` — so parameters, checkpoints and LR schedules are bit-for-bit those of
``optimizer.step()``. Anything it does not reproduce exactly (another optimiser class, hooks,
nesterov, maximize, foreach/fused, differentiable, tensor hyper-parameters, sparse gradients,
grad scaling) goes through ``optimizer.step()`` itself.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks


def _plain(opt: torch.optim.Optimizer) -> bool:
    step = opt.__dict__.get("step")  # an instance attribute: wrapped or replaced
    if step is not None and not hasattr(step, "_wrapped_by_lr_sched"):
        return False
    if type(opt) is not torch.optim.SGD or opt._optimizer_step_pre_hooks \
            or opt._optimizer_step_post_hooks or _global_optimizer_pre_hooks \
            or _global_optimizer_post_hooks or getattr(opt, "grad_scale", None) is not None \
            or getattr(opt, "found_inf", None) is not None:
        return False
    for g in opt.param_groups:
        if g["nesterov"] or g["maximize"] or g["foreach"] or g["fused"] \
                or g.get("differentiable") or isinstance(g["lr"], torch.Tensor) \
                or isinstance(g["weight_decay"], torch.Tensor) \
                or any(p.grad is not None and p.grad.is_sparse for p in g["params"]):
            return False
    return True


def sgd_step(opt: torch.optim.Optimizer) -> None:
    """``opt.step()``, bit-identical; direct for a plain torch SGD (see the module doc)."""
    if not _plain(opt):
        opt.step()
    elif torch.is_grad_enabled():
        with torch.no_grad():
            _apply(opt)
    else:  # inside the model's no_grad block already: no second context (~2 µs a step)
        _apply(opt)


def _apply(opt: torch.optim.Optimizer) -> None:
    for group in opt.param_groups:
        wd, momentum, lr = group["weight_decay"], group["momentum"], group["lr"]
        dampening = group["dampening"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            if momentum != 0:
                state = opt.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                grad = buf
            p.add_(grad, alpha=-lr)
    opt._opt_called = True  # what the LR scheduler's step() wrapper records
