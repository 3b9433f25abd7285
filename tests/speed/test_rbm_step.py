"""The binary RBM's NumPy step (``rbm_step`` family): the same update as the torch step to
float64 rounding, drawing the same random numbers; chosen by pin, fixed route or the size rule
(never timed), without touching the model, its optimiser or the global RNG."""

from __future__ import annotations

import warnings

import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.base import OptimOptions
from shortrun.models.grbm import GaussianBernoulliRBM
from shortrun.models.rbm import BernoulliRBM
from shortrun.speed import engine as routes
from shortrun.speed import rbm_numpy as rbm_fused
from shortrun.speed import rbm_step

VARIANTS = [dict(learning="pcd", centering=True, momentum=0.5, k=1),
            dict(learning="pcd", centering=False, momentum=0.0, k=2),
            dict(learning="cd", centering=True, momentum=0.0, k=1),
            dict(learning="cd", centering=False, momentum=0.9, k=3)]


def _rbm(dtype=torch.float64, n_visible=12, n_hidden=5, **options):
    torch.manual_seed(0)
    m = BernoulliRBM(n_hidden, info=DataInfo((n_visible,), "binary"), n_chains=9,
                     **options).to(dtype)
    with torch.no_grad():  # away from the initial point, so every term of the update matters
        m.W.normal_(0, 0.5)
        m.b.normal_(0, 0.5)
        m.c.normal_(0, 0.5)
        m.mu.uniform_(0.2, 0.6)
        m.lam.uniform_(0.3, 0.7)
        if options.get("learning") == "pcd":
            m.source.chains.copy_((torch.rand_like(m.source.chains) < 0.5).to(dtype))
    return m


def _batches(n_visible=12, dtype=torch.float64, n=4, size=7):
    g = torch.Generator().manual_seed(3)
    return [(torch.rand(size, n_visible, generator=g) < 0.4).to(dtype) for _ in range(n)]


def _tensors(m):
    chains = m.source.chains if m.options.learning == "pcd" else None
    return m.W, m.b, m.c, m.mu, m.lam, chains


def _step(model, route, opt, batch):
    """One update of ``model`` by ``route`` (``torch``: the model's own step)."""
    if route == "torch":
        return model._torch_step(batch, {"main": opt})
    impl = rbm_step.RBM_STEP.impls[route]
    return impl(_tensors(model), batch, model.fast_step_options(), opt)


def _route(model, batch):
    return rbm_step.step_route(_tensors(model), batch, model.fast_step_options())


def _run(model, route, batches, weight_decay=0.01):
    opt = model.build_optimizers(OptimOptions(lr=0.1, weight_decay=weight_decay))["main"]
    torch.manual_seed(11)
    metrics = [_step(model, route, opt, b) for b in batches]
    return model, opt, metrics


@pytest.mark.parametrize("route", ["numpy", "numpy@1"])
@pytest.mark.parametrize("options", VARIANTS)
def test_numpy_step_is_the_torch_update_in_float64(options, route):
    """Four updates from one state and RNG state: parameters, offsets, chains, gradients,
    momentum buffers and the logged free energies agree to float64 rounding."""
    a, opt_a, m_a = _run(_rbm(**options), "torch", _batches())
    b, opt_b, m_b = _run(_rbm(**options), route, _batches())
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(y, x, rtol=1e-10, atol=1e-12, msg=name)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-10, atol=1e-12)
        buf_a = opt_a.state[p].get("momentum_buffer")
        buf_b = opt_b.state[q].get("momentum_buffer")
        assert (buf_a is None) == (buf_b is None)
        if buf_a is not None:
            torch.testing.assert_close(buf_b, buf_a, rtol=1e-10, atol=1e-12)
    for x, y in zip(m_a, m_b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert y[k] == pytest.approx(x[k], rel=1e-10, abs=1e-12)
    assert torch.equal(torch.get_rng_state(), _rng_after(options))  # same numbers drawn


def _rng_after(options):
    model, _, _ = _run(_rbm(**options), "torch", _batches())
    return torch.get_rng_state()


def test_numpy_step_moves_the_parameters_up_the_likelihood_gradient():
    """Direction, on its own: with chains at the data the positive and negative statistics
    cancel; a batch of ones against chains of zeros raises b and every weight (to ones)."""
    m = _rbm(learning="pcd", centering=False, momentum=0.0, k=1)
    with torch.no_grad():
        m.W.zero_()
        m.b.fill_(-30.0)  # the chains' visible units stay 0 after their Gibbs sweep
        m.source.chains.zero_()
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    _run(m, "numpy", [torch.ones(7, 12, dtype=torch.float64)], weight_decay=0.0)
    assert (m.b - before["b"] > 0).all()
    assert (m.W - before["W"] > 0).all()


def test_float32_numpy_step_tracks_the_torch_step():
    a, _, m_a = _run(_rbm(torch.float32, learning="pcd", centering=True, momentum=0.5),
                     "torch", _batches(dtype=torch.float32, n=2))
    b, _, m_b = _run(_rbm(torch.float32, learning="pcd", centering=True, momentum=0.5),
                     "numpy", _batches(dtype=torch.float32, n=2))
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-5)
    assert m_b[-1]["loss"] == pytest.approx(m_a[-1]["loss"], rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_elementwise_kernels_are_the_torch_steps_own(dtype):
    """σ and the rows' softplus sums written into NumPy memory are bit-identical to the torch
    step's ``torch.sigmoid`` and ``F.softplus(...).sum(1)``, in the tails too."""
    a = torch.linspace(-120, 120, 2001, dtype=dtype).reshape(-1, 3)[:, :2].contiguous()
    out = torch.empty_like(a)
    rbm_fused._sigmoid_into(a, out)
    assert torch.equal(out, torch.sigmoid(a))
    rows = rbm_fused._softplus_rows(a)
    assert rows.dtype == a.numpy().dtype
    assert torch.equal(torch.from_numpy(rows), torch.nn.functional.softplus(a).sum(1))


def _passes(model, batch):
    return routes.passes(rbm_step.RBM_STEP, "numpy", _tensors(model), batch,
                         model.fast_step_options())


@pytest.mark.parametrize("options", VARIANTS)
def test_the_cross_check_accepts_the_numpy_step(options, monkeypatch):
    monkeypatch.setattr(routes, "_checked", {})
    m = _rbm(torch.float32, **options)
    assert _passes(m, _batches(dtype=torch.float32)[0])


@pytest.mark.parametrize("options", VARIANTS)
def test_the_reference_is_the_models_torch_step_in_float64(options):
    """The cross-check's plain torch reference computes the model's own update: its gradients,
    offsets, chains and free energies equal the torch step's, from one state and RNG state."""
    m = _rbm(**options)
    opts = m.fast_step_options()
    batch = _batches()[0]
    t = [x.detach().clone() if x is not None else None for x in _tensors(m)]
    torch.manual_seed(5)
    want = m._torch_step(batch, {"main": _opt(m, lr=0.0)})
    torch.manual_seed(5)
    got, grads = rbm_step.reference_gradients(t, batch, opts)
    for a, b in zip([*grads, *t], [m.W.grad, m.b.grad, m.c.grad, *_tensors(m)], strict=True):
        assert (a is None and b is None) or torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_the_cross_check_rejects_a_wrong_step(monkeypatch):
    monkeypatch.setattr(routes, "_checked", {})
    monkeypatch.setattr(rbm_fused, "_softplus_rows",
                        lambda a: torch.nn.functional.softplus(a).sum(1).numpy() * 1.001)
    assert not _passes(_rbm(torch.float32), _batches(dtype=torch.float32)[0])


@pytest.mark.parametrize("make", [
    lambda: _rbm(learning="fpcd"),
    lambda: BernoulliRBM(4, info=DataInfo((6,), "binary"), chain="tempering", n_temps=3),
    lambda: GaussianBernoulliRBM(4, info=DataInfo((6,), "vector")),
])
def test_other_rbms_take_the_torch_step(make):
    assert make().fast_step_options() is None


def test_bf16_autocast_takes_the_torch_step():
    m = _rbm(torch.float32)
    batch = _batches(dtype=torch.float32)[0]
    assert "numpy" in rbm_step.RBM_STEP.candidates(_tensors(m), batch, None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert rbm_step.RBM_STEP.candidates(_tensors(m), batch, None) == ["torch"]


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("rbm_step was timed"))


def _opt(model, lr=0.05):
    return model.build_optimizers(OptimOptions(lr=lr))["main"]


@pytest.mark.parametrize(("n_visible", "n_hidden", "threads", "want"), [
    (12, 5, 1, "numpy"), (12, 5, 2, "numpy@1"), (784, 500, 1, "numpy"), (784, 500, 2, "torch")])
def test_the_size_rule_decides_without_timing_or_touching_the_model(
        n_visible, n_hidden, threads, want, unpinned):
    torch.set_num_threads(threads)
    m = _rbm(torch.float32, n_visible=n_visible, n_hidden=n_hidden)
    opt = _opt(m)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    rng = torch.get_rng_state()
    batch = _batches(n_visible, dtype=torch.float32)[0]
    assert _route(m, batch).name == want
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(state[k], v) for k, v in m.state_dict().items())
    assert not opt.state
    [(key, entry)] = [(k, e) for k, e in routes.remembered().items()
                      if k.startswith("rbm_step|")]
    assert entry == {"name": want, "rule": True}
    if n_visible == 12:
        assert key == f"rbm_step|float32|threads={threads}|16x8x8x16|pcd-1|plain"
    torch.set_num_threads(1)


def test_training_step_takes_the_chosen_route_once_settled(unpinned, monkeypatch):
    taken: list[str] = []
    real = rbm_step.numpy_step
    monkeypatch.setattr(rbm_step, "numpy_step", lambda *a: (taken.append("numpy"), real(*a))[1])
    m = _rbm(torch.float32)
    opt = _opt(m)
    for b in _batches(dtype=torch.float32, n=3):
        m.training_step(b, 0, {"main": opt})
    assert taken == ["numpy"] * 3


@pytest.mark.parametrize(("env", "route"), [
    ({"SHORTRUN_ROUTE_RBM_STEP": "numpy"}, "numpy"),
    ({"SHORTRUN_ROUTE_RBM_STEP": "torch"}, "torch"),
    ({"SHORTRUN_ROUTE": "numpy"}, "numpy"),
    ({"SHORTRUN_ROUTE": "onednn"}, "torch"),  # a deleted family's route: the fixed torch step
])
def test_pins_decide_without_timing(env, route, unpinned, monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed a pinned route"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    m = _rbm(torch.float32)
    assert _route(m, _batches(dtype=torch.float32)[0]).name == route


def test_a_numpy_pin_on_an_rbm_it_cannot_run_takes_the_torch_step(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", "numpy")
    m = _rbm(torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _route(m, _batches(dtype=torch.float32)[0]).name == "torch"


def test_a_bad_pin_names_the_routes(monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", "blas")
    m = _rbm(torch.float32)
    with pytest.raises(ConfigError, match="SHORTRUN_ROUTE_RBM_STEP=blas.*torch, numpy"):
        _route(m, _batches(dtype=torch.float32)[0])


def test_trainer_run_on_the_numpy_step_resumes_bit_identically(tmp_path, monkeypatch):
    """N straight steps equal N/2 + resume + N/2 on the NumPy route too (no step is special),
    and the lr scheduler sees ``optimizer.step()`` called (no warning)."""
    from shortrun.train.config import resolve
    from shortrun.train.trainer import Trainer

    monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", "numpy")
    sets = ["train.epochs=2", "train.lr_decay=0.9", "train.progress=false",
            "train.log_every=10", "train.ckpt_every=30", "train.sample_every=100000"]

    def fit(out, extra):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tr = Trainer(resolve("rbm_digits", [*sets, *extra]), out)
            tr.fit()
            tr.close()
        return tr.model.state_dict()

    straight = fit(tmp_path / "a", [])
    fit(tmp_path / "b", ["train.steps=30"])
    resumed = Trainer(resolve("rbm_digits", sets), tmp_path / "b", resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.fit()
    resumed.close()
    for k, v in straight.items():
        assert torch.equal(resumed.model.state_dict()[k], v), k


def test_a_one_thread_numpy_choice_lets_the_trainer_drop_to_one_thread(unpinned, two_threads):
    """At two threads the size rule puts a small RBM on NumPy with a one-thread BLAS; the step
    is called through its route, so the Trainer sees one decided one-thread route."""
    from shortrun.train.threads import ThreadsForTheWork

    m = _rbm(torch.float32)
    opt = _opt(m)
    threads = ThreadsForTheWork(None)
    m.training_step(_batches(dtype=torch.float32)[0], 0, {"main": opt})
    assert threads.after_first_step() and torch.get_num_threads() == 1
    threads.restore()
    assert torch.get_num_threads() == 2


@pytest.fixture
def two_threads():
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)


def test_the_step_route_holds_for_the_run_after_the_thread_drop(unpinned, two_threads):
    """numpy@1 at two threads: after the Trainer's drop to one thread the tensors keep numpy@1
    (re-choosing would switch the arithmetic mid-run)."""
    from shortrun.train.threads import ThreadsForTheWork

    m = _rbm(torch.float32)
    opt = _opt(m)
    threads = ThreadsForTheWork(None)
    batches = _batches(dtype=torch.float32, n=3)
    m.training_step(batches[0], 0, {"main": opt})
    assert threads.after_first_step() and torch.get_num_threads() == 1
    try:
        for b in batches[1:]:
            m.training_step(b, 1, {"main": opt})
        settled = rbm_step._SETTLED.state(m.W)
        assert {r.name for r in settled.values()} == {"numpy@1"}
    finally:
        threads.restore()


def test_step_hooks_run_once_on_either_route():
    """The optimiser's own step hooks (the data-parallel gradient average registers one) run
    once per update on either route, also after torch has wrapped SGD's step."""
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)  # SGD.step is now wrapped
    for route in ("torch", "numpy"):
        m = _rbm(torch.float32)
        opt = _opt(m)
        seen: list[str] = []
        opt.register_step_pre_hook(lambda *a, seen=seen: seen.append("pre"))
        opt.register_step_post_hook(lambda *a, seen=seen: seen.append("post"))
        _step(m, route, opt, _batches(dtype=torch.float32)[0])
        assert seen == ["pre", "post"], route


@pytest.mark.parametrize("threads", [2, 1])
def test_a_large_numpy_step_is_the_torch_update_in_float64(threads):
    """A shape whose elementwise ops torch splits over its threads: still the torch update to
    float64 rounding at 2 threads and at 1."""
    torch.set_num_threads(threads)  # the autouse fixture sets 1 again for the next test
    options = dict(learning="cd", centering=True, momentum=0.5, k=1)
    nv, nh = 400, 400
    batches = _batches(n_visible=nv, n=2, size=90)
    a, _, m_a = _run(_rbm(n_visible=nv, n_hidden=nh, **options), "torch", batches)
    b, _, m_b = _run(_rbm(n_visible=nv, n_hidden=nh, **options), "numpy", batches)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(y, x, rtol=1e-10, atol=1e-12, msg=name)
    for x, y in zip(m_a, m_b, strict=True):
        for k in x:
            assert y[k] == pytest.approx(x[k], rel=1e-10, abs=1e-12)


@pytest.mark.parametrize(("n", "chunk"), [(9, rbm_fused.GIBBS_CHUNK), (9, 40), (600, 40)])
def test_numpy_gibbs_is_block_gibbs_drawing_the_same_numbers(n, chunk, monkeypatch):
    """Float64, from one generator state: the same final states and the same numbers drawn,
    whether a chunk holds many sweeps, less than one (40 numbers), or a draw is large enough
    for ``uniform``'s NumPy generator (600 chains × 64 visible units)."""
    from shortrun.samplers.gibbs import block_gibbs

    monkeypatch.setattr(rbm_fused, "GIBBS_CHUNK", chunk)
    m = _rbm(n_visible=64, n_hidden=5, centering=True)
    p = m.params()
    v0 = (torch.rand(n, 64, generator=torch.Generator().manual_seed(2)) < 0.5).double()
    assert (n * 64 >= rbm_fused.UNIFORM_NUMPY_FROM) == (n == 600)
    g_torch, g_numpy = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = block_gibbs(p, v0, 7, generator=g_torch).v
    got = rbm_fused.numpy_gibbs(p, v0, 7, g_numpy)
    assert torch.equal(got, want)
    assert torch.equal(g_numpy.get_state(), g_torch.get_state())
    assert torch.equal(v0, (torch.rand(n, 64, generator=torch.Generator().manual_seed(2))
                            < 0.5).double())  # the start is not moved in place


def test_sampling_follows_the_step_route(monkeypatch):
    """A model samples by NumPy once its updates settled on a NumPy route, by torch before
    and when the step is pinned to torch."""
    m = _rbm(torch.float32)
    x0 = torch.zeros(2, 12)
    assert rbm_step.fast_gibbs(m.W, m.params(), x0, 1) is None
    for pin, numpy_after in (("torch", False), ("numpy", True)):
        monkeypatch.setenv("SHORTRUN_ROUTE_RBM_STEP", pin)
        routes.forget()  # pins are read when a route is first settled in a process
        m = _rbm(torch.float32)
        m.training_step(_batches(dtype=torch.float32)[0], 0, {"main": _opt(m)})
        assert (rbm_step.fast_gibbs(m.W, m.params(), x0, 1) is not None) == numpy_after
    torch.manual_seed(3)
    x = m.sample(4, steps=5)
    assert x.shape == (4, 12) and set(x.unique().tolist()) <= {0.0, 1.0}
