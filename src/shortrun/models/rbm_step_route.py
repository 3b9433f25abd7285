"""The ``rbm_step`` route family: which implementation runs a binary RBM's whole CD-k / PCD-k
update, the torch calls of :class:`shortrun.models.rbm_learning.RBMBase` or the NumPy calls of
:class:`shortrun.models.rbm_fused.NumpyStep` (the module docstring there says why and when),
chosen per machine like the products: pinned, cached, or measured on scratch copies of the model
after the float64 cross-check (:func:`numpy_works`). :func:`step_route` is what the RBM calls.

``SHORTRUN_ROUTE_RBM_STEP=torch|numpy`` pins the route (``SHORTRUN_ROUTE=numpy`` too);
``SHORTRUN_ROUTE`` naming another family's route, or ``train.routes: fixed``, puts the step on
torch, its fixed route.
"""

from __future__ import annotations

import copy

import torch

from shortrun import routes
from shortrun.models.rbm_fused import RBM, NumpyStep

FAMILY = "rbm_step"
ROUTES = ("torch", "numpy")  # what a pin may name; "numpy@1" is NumPy with a one-thread BLAS
FIXED = "torch"
_WORKS: dict[tuple, bool] = {}


def applies(model: RBM) -> bool:
    """Whether the NumPy step computes this model's update (module docstring, "Scope")."""
    m = model.options
    W = model.W
    # only the class that declares the NumPy step, not a subclass that may change the update
    if not (vars(type(model)).get("numpy_step", False) and m.learning in ("cd", "pcd")
            and m.chain == "gibbs"):
        return False
    if W.device.type != "cpu" or W.dtype not in (torch.float32, torch.float64):
        return False
    if torch.is_autocast_enabled("cpu"):
        return False
    return not (torch.distributed.is_available() and torch.distributed.is_initialized())


def samples_with_numpy(model: RBM) -> bool:
    """Whether :meth:`RBMBase.sample` runs its Gibbs sweeps as NumPy calls: where the NumPy
    step applies and this model's measured (or pinned) ``rbm_step`` route is a NumPy one.
    The sampler follows the step's route rather than a size rule of its own: both are the
    same products and elementwise calls, so the measurement that chose the step stands for
    it; a model that has not trained in this process samples by torch."""
    settled = model._settled_step_routes
    return (bool(settled) and all(c.name != "torch" for c in settled.values())
            and applies(model))


def numpy_works(model: RBM) -> bool:
    """The float64 cross-check, once per option set: two updates of a float64 copy of
    ``model`` by the torch step and by :class:`NumpyStep`, from the same state and RNG state,
    agree to float64 rounding (parameters, offsets, chains, momentum, metrics)."""
    m = model.options
    key = (m.learning, m.k, bool(model.centered), m.momentum > 0)
    if key not in _WORKS:
        try:
            _WORKS[key] = _cross_check(model)
        except Exception:  # any failure means the route is not a candidate
            _WORKS[key] = False
    return _WORKS[key]


def _twin(model: RBM, dtype: torch.dtype, lr: float = 0.05,
          weight_decay: float = 1e-3) -> tuple[RBM, torch.optim.Optimizer]:
    from shortrun.models.base import OptimOptions

    # a scratch copy of the parameters, buffers and chains, not of the run's data: the model
    # lends its reference data to no copy (so the timing needs no special deep copy of a Model)
    data, model.reference_data = model.reference_data, None
    try:
        twin = copy.deepcopy(model).to(dtype)
    finally:
        model.reference_data = data
    twin._step_route_pin = "torch"
    opt = twin.build_optimizers(OptimOptions(lr=lr, weight_decay=weight_decay))["main"]
    return twin, opt


def _cross_check(model: RBM) -> bool:
    g = torch.Generator().manual_seed(0)
    nv, n = model.n_visible, max(model.options.n_chains, 8)
    batch = (torch.rand(n, nv, generator=g, dtype=torch.float64) < 0.3).double()
    states = []
    with torch.random.fork_rng(devices=[]):
        for route in ROUTES:
            twin, opt = _twin(model, torch.float64)
            with torch.no_grad():
                twin.W.copy_(torch.randn(twin.W.shape, generator=g.manual_seed(1),
                                         dtype=torch.float64) * 0.3)
                twin.b.copy_(torch.randn(twin.b.shape, generator=g, dtype=torch.float64) * 0.3)
                twin.c.copy_(torch.randn(twin.c.shape, generator=g, dtype=torch.float64) * 0.3)
                twin.mu.copy_(batch.mean(0))
                twin.lam.fill_(0.4)
                if model.options.learning == "pcd":
                    twin.source.chains.copy_(
                        (torch.rand(twin.source.chains.shape, generator=g,
                                    dtype=torch.float64) < 0.5).double())
            torch.manual_seed(123)
            step = NumpyStep(twin, opt) if route == "numpy" else None
            metrics = []
            for i in range(2):
                half = batch[i * (n // 2):(i + 1) * (n // 2)]
                metrics.append(step(half) if step else twin.training_step(half, i,
                                                                          {"main": opt}))
            bufs = [opt.state[p].get("momentum_buffer") for p in (twin.W, twin.b, twin.c)]
            states.append(([t.clone() for t in twin.state_dict().values()],
                           [b for b in bufs if b is not None], metrics))
    (s_t, b_t, m_t), (s_n, b_n, m_n) = states
    if len(b_t) != len(b_n):
        return False
    close = all(torch.allclose(x, y, rtol=1e-9, atol=1e-9)
                for x, y in zip([*s_t, *b_t], [*s_n, *b_n], strict=True))
    close &= all(abs(a[k] - b[k]) <= 1e-9 * (1 + abs(a[k]))
                 for a, b in zip(m_t, m_n, strict=True) for k in a)
    return bool(close)


def route_key(model: RBM, batch: int) -> str:
    """``rbm_step|dtype|threads=N|visible x hidden x batch x chains (power-of-two buckets)|
    learning-k|centering``: a cache key."""
    m = model.options
    n_chains = m.n_chains if m.learning == "pcd" else batch
    dims = "x".join(str(routes.bucket(d))
                    for d in (model.n_visible, model.n_hidden, batch, n_chains))
    return (f"{FAMILY}|{str(model.W.dtype).removeprefix('torch.')}|threads="
            f"{torch.get_num_threads()}|{dims}|{m.learning}-{m.k}|"
            f"{'centered' if model.centered else 'plain'}")


def _torch(model: RBM, optimizer: torch.optim.Optimizer,
           batch: torch.Tensor) -> dict[str, float]:
    return model._torch_step(batch, {"main": optimizer})


def _numpy_on(threads: int | None):
    def run(model: RBM, optimizer: torch.optim.Optimizer,
            batch: torch.Tensor) -> dict[str, float]:
        return NumpyStep(model, optimizer, threads)(batch)
    return run


# "numpy" runs NumPy's BLAS at torch's thread count, "numpy@1" at one (a second BLAS thread on
# a 64 × 20 product costs a scheduler slice whenever the other cores are busy)
IMPLS = {"torch": _torch, "numpy": _numpy_on(None), "numpy@1": _numpy_on(1)}
_UNWATCHED = {name: routes.Chosen(name, IMPLS) for name in IMPLS}


def step_route(model: RBM, optimizer: torch.optim.Optimizer,
               batch: torch.Tensor) -> routes.Chosen:
    """The route of this model's updates on batches like ``batch`` (``torch``, ``numpy`` or
    ``numpy@1``), called as ``route(model, optimizer, batch)``: pinned, cached or measured now
    on scratch copies (the model, its optimiser and the global RNG are not touched), and kept
    in :data:`shortrun.routes.MEMO` with the other routes, where the Trainer's thread choice
    (:mod:`shortrun.train.threads`) sees it. A measured choice is not re-timed while training
    (a whole update cannot be repeated on the live model).

    Once a model has a route for a batch shape it keeps it, whatever the thread count later
    (the Trainer drops to one thread after a ``numpy@1`` first step: re-choosing then could
    switch the arithmetic mid-run, and a resumed run, whose first step is again at the full
    thread count, would not repeat the uninterrupted one)."""
    m = model.options
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    settled_key = (batch.dtype, tuple(batch.shape), torch.is_autocast_enabled("cpu"),
                   distributed)
    chosen = model._settled_step_routes.get(settled_key)
    if chosen is not None:
        return chosen
    memo_key = (FAMILY, type(model), model.W.dtype, model.n_visible, model.n_hidden,
                m.learning, m.k, m.n_chains, m.chain, bool(getattr(model, "centered", False)),
                m.momentum > 0, torch.get_num_threads(), *settled_key)
    chosen = routes.MEMO.get(memo_key)
    if chosen is None:
        # the scratch copies' products are not the step's: the Trainer must not count them
        calls = {id(c): c.calls for c in routes.MEMO.values()}
        chosen = _first_route(model, optimizer, batch)
        for c in routes.MEMO.values():
            c.calls = calls.get(id(c), 0)
        routes.MEMO[memo_key] = chosen
    model._settled_step_routes[settled_key] = chosen
    return chosen


def _first_route(model: RBM, optimizer: torch.optim.Optimizer,
                 batch: torch.Tensor) -> routes.Chosen:
    pinned = routes.pinned_route(FAMILY, ROUTES)
    if pinned in ROUTES:
        return _UNWATCHED[pinned if pinned == "torch" or applies(model) else FIXED]
    if pinned is not None or not applies(model) or not numpy_works(model):
        return _UNWATCHED[FIXED]
    names = ["torch", "numpy"] + (["numpy@1"] if torch.get_num_threads() > 1 else [])
    calls = {}
    for name in names:
        twin, opt = _twin(model, model.W.dtype, optimizer.param_groups[0]["lr"],
                          optimizer.param_groups[0]["weight_decay"])
        calls[name] = (lambda f=IMPLS[name], twin=twin, opt=opt: f(twin, opt, batch))
    key = route_key(model, len(batch))
    with torch.random.fork_rng(devices=[]):
        name = routes.choose(key, calls)
    return routes.Chosen(name, IMPLS, key, watch=False)
