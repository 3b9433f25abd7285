"""The RBMs' plain optimiser: torch's SGD update bit for bit, SGD's checkpoints, ExponentialLR's
schedule, and no ``torch._dynamo`` import on the way."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from shortrun.models.rbm_sgd import RBMSGD, ExponentialDecay, lr_decay
from shortrun.speed.rbm_numpy import numpy_sgd


def _params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(6, 4, generator=g)),
            torch.nn.Parameter(torch.randn(6, generator=g))]


def _grads(ps, step):
    g = torch.Generator().manual_seed(100 + step)
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g)


def _groups(ps, decay):
    return [{"params": [ps[0]], "weight_decay": decay}, {"params": [ps[1]], "weight_decay": 0.0}]


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("form", ["step", "numpy_sgd"])
def test_the_update_is_torch_sgd_bit_for_bit(momentum, form):
    """Three steps with weight decay on the first group: same bits as torch.optim.SGD(foreach)
    (the NumPy form to float32 rounding: it multiplies lr·m before subtracting)."""
    a, b = _params(), _params()
    ref = torch.optim.SGD(_groups(a, 0.01), lr=0.1, momentum=momentum, foreach=True)
    ours = RBMSGD(_groups(b, 0.01), lr=0.1, momentum=momentum, foreach=True)
    for step in range(3):
        _grads(a, step)
        _grads(b, step)
        ref.step()
        ours.step() if form == "step" else numpy_sgd(ours)
    for x, y in zip(a, b, strict=True):
        if form == "step":
            assert torch.equal(x, y)
        else:
            torch.testing.assert_close(y, x, rtol=1e-6, atol=1e-7)
    if momentum:
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(ours.state[y]["momentum_buffer"],
                                       ref.state[x]["momentum_buffer"])


def test_a_torch_sgd_checkpoint_loads_and_continues_identically():
    a, b = _params(), _params()
    ref = torch.optim.SGD(_groups(a, 0.01), lr=0.1, momentum=0.5, foreach=True)
    _grads(a, 0)
    ref.step()
    with torch.no_grad():
        for x, y in zip(a, b, strict=True):
            y.copy_(x)
    ours = RBMSGD(_groups(b, 0.0), lr=0.3, momentum=0.5)
    ours.load_state_dict(ref.state_dict())
    assert ours.param_groups[0]["weight_decay"] == 0.01 and ours.param_groups[0]["lr"] == 0.1
    _grads(a, 1)
    _grads(b, 1)
    ref.step()
    ours.step()
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    # and back: our state dict has SGD's layout
    again = torch.optim.SGD(_groups(_params(), 0.0), lr=1.0, momentum=0.5)
    again.load_state_dict(ours.state_dict())
    assert again.param_groups[0]["lr"] == 0.1


def test_a_state_dict_of_other_groups_is_refused():
    ours = RBMSGD(_groups(_params(), 0.0), lr=0.1)
    other = torch.optim.SGD(_params(), lr=0.1).state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        ours.load_state_dict(other)


def test_unsupported_options_are_named():
    with pytest.raises(ValueError, match="nesterov is not supported"):
        RBMSGD(_params(), lr=0.1, momentum=0.9, nesterov=True)
    with pytest.raises(TypeError, match="unknown option"):
        RBMSGD(_params(), lr=0.1, betas=(0.9, 0.99))


def test_the_decay_is_exponential_lr_to_the_bit_and_reads_its_state():
    ps = _params()
    ref = torch.optim.lr_scheduler.ExponentialLR(torch.optim.SGD(ps, lr=0.07), gamma=0.93)
    ours = lr_decay(RBMSGD(_params(), lr=0.07), 0.93)
    assert isinstance(ours, ExponentialDecay)
    for _ in range(5):
        ref.optimizer.step()
        ref.step()
        ours.step()
    assert ours.get_last_lr() == ref.get_last_lr()
    fresh = ExponentialDecay(RBMSGD(_params(), lr=0.07), 0.5)
    fresh.load_state_dict(ref.state_dict())
    assert (fresh.gamma, fresh.last_epoch) == (0.93, ref.last_epoch)


def test_training_an_rbm_never_imports_torch_dynamo():
    """torch.optim constructors import torch._dynamo (seconds); the RBM path must not."""
    code = ("import sys, numpy as np, shortrun\n"
            "x = (np.random.default_rng(0).random((40, 8)) < 0.5).astype('float32')\n"
            "shortrun.fit(shortrun.BernoulliRBM(n_hidden=3), x, steps=3, batch_size=10,\n"
            "             progress=False)\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "SHORTRUN_ROUTE": "torch"})
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
