"""sgd_step: the direct SGD update is bit-for-bit torch's SGD.step (momentum, weight decay,
dampening, LR schedule, checkpointed state), and falls back to step() where it cannot be."""

import pytest
import torch

from shortrun.models.sgd_step import _plain, sgd_step


def _pair(**kw):
    g = torch.Generator().manual_seed(0)
    ps = [torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(3))]
    qs = [torch.nn.Parameter(p.detach().clone()) for p in ps]

    def groups(x):
        return [{"params": [x[0]], "weight_decay": 0.01}, {"params": [x[1]]}]

    return ps, qs, torch.optim.SGD(groups(ps), lr=0.05, **kw), \
        torch.optim.SGD(groups(qs), lr=0.05, **kw)


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.5}, {"momentum": 0.9, "dampening": 0.1}])
def test_direct_step_is_bit_identical_to_torch_sgd(kw):
    ps, qs, a, b = _pair(**kw)
    sa = torch.optim.lr_scheduler.ExponentialLR(a, gamma=0.9)
    sb = torch.optim.lr_scheduler.ExponentialLR(b, gamma=0.9)
    assert _plain(a)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        for p, q in zip(ps, qs, strict=True):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        a.step()
        sgd_step(b)
        sa.step()
        sb.step()
    for p, q in zip(ps, qs, strict=True):
        assert torch.equal(p, q)
    assert str(a.state_dict()) == str(b.state_dict())


def test_falls_back_to_step_for_hooks_and_other_optimisers():
    ps, _, a, _ = _pair(momentum=0.5)
    calls = []
    a.register_step_pre_hook(lambda *args: calls.append(1))
    for p in ps:
        p.grad = torch.ones_like(p)
    sgd_step(a)
    assert calls == [1]
    assert not _plain(torch.optim.SGD(ps, lr=0.1, nesterov=True, momentum=0.5))
    assert not _plain(torch.optim.Adam(ps))
