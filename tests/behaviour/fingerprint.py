"""Behaviour fingerprints: every parameter and buffer of every built-in recipe after a few
training steps at a tiny size and a fixed seed.

Recorded before the library redesign (issue 15) so that moving code around can be shown not to
change what any recipe computes. Two levels:

- ``exact``: a SHA-256 over the sorted per-tensor digests of the raw bytes. It holds only on the
  CPU (model and vector units) and torch version it was recorded on (BLAS and oneDNN kernels
  round differently from machine to machine), so the test demands it only there, and on the
  machines added since with ``--add-machine`` (``exact_elsewhere``: their digests of the same
  code, taken after the summaries agreed with the record).
- ``summary``: per tensor ``(shape, Σx, Σ|x|)`` in float64, compared with a relative tolerance
  on any machine.

Both are independent of state-dict key names, so a tensor may move to another submodule
(an RBM's chains into a chain source, say) without changing its fingerprint.

Run ``python -m tests.behaviour.fingerprint --record`` to re-record after an *intended* change,
and say why in the commit (it drops ``exact_elsewhere``: those digests were of the old code).
``--record RECIPE ...`` re-records only those recipes and keeps every other recipe's digests,
``exact_elsewhere`` included.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
RECORD = HERE / "fingerprints.json"
STEPS = 2
BATCH = 4
N_TRAIN = 64

# Datasets whose files shared/data does not carry: a synthetic stand-in of the same shape and
# range (seeded), so the recipe's code path still runs.
SYNTHETIC = {"svhn": (3, 32, 32), "celeba64": (3, 64, 64)}


def machine_key() -> str:
    """The CPU model with its vector units, and torch: bits agree only where all three do."""
    from shortrun.hardware import cpu_machine

    return f"{cpu_machine()} | torch {torch.__version__}"


# Paper-size networks that would take minutes even for two steps: narrowed, same code path.
NARROW = {
    "dual_mcmc_cifar10": ["model.ebm_channels=16", "model.gen_channels=16",
                          "model.inf_channels=8"],
    "dual_mcmc_celeba64": ["model.ebm_channels=16", "model.gen_channels=16",
                           "model.inf_channels=8"],
    **{f"damc_{d}": ["model.ngf=16", "model.damc_width=16", "model.damc_emb=32",
                     "model.damc_encoder_width=8", "model.damc_steps=10"]
       for d in ("svhn", "cifar10", "celeba64")},
}


def tiny_overrides(recipe: str) -> list[str]:
    return [*NARROW.get(recipe, []), f"train.steps={STEPS}", f"train.batch_size={BATCH}",
            "train.seed=3",
            "train.log_every=1", "train.sample_every=100000", "train.ckpt_every=100000",
            "train.progress=false", "train.threads=1"]


def tiny_data(cfg):
    """The recipe's own data cut to ``N_TRAIN`` examples (or a synthetic stand-in)."""
    from shortrun.data.base import DataInfo, LoadedData
    from shortrun.data.registry import load_data

    name = cfg.data.name
    if name in SYNTHETIC:
        shape = SYNTHETIC[name]
        g = torch.Generator().manual_seed(11)
        x = torch.rand((N_TRAIN, *shape), generator=g) * 2 - 1
        info = DataInfo(shape=shape, kind="image", low=-1.0, high=1.0, raw_scale=127.5,
                        raw_offset=127.5)
        return LoadedData(train=x, test=x[:16].clone(), info=info)
    data = load_data(cfg.data)
    cut = {"train": data.train[:N_TRAIN].clone()}
    if data.train_labels is not None:
        cut["train_labels"] = data.train_labels[:N_TRAIN].clone()
    if data.test is not None:
        cut["test"] = data.test[:16].clone()
    if data.test_labels is not None:
        cut["test_labels"] = data.test_labels[:16].clone()
    return LoadedData(info=data.info, extras=data.extras, **cut)


def tensor_digest(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(str((tuple(t.shape), str(t.dtype))).encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def fingerprint_state(state: dict[str, torch.Tensor]) -> dict:
    tensors = [t for t in state.values() if isinstance(t, torch.Tensor)]
    digests = sorted(tensor_digest(t) for t in tensors)
    summary = []
    for t in tensors:
        d = t.detach().double().cpu() if t.is_floating_point() else t.detach().cpu().double()
        summary.append([list(t.shape), float(d.sum()), float(d.abs().sum())])
    summary.sort(key=lambda s: (s[0], s[2], s[1]))
    return {"exact": hashlib.sha256("".join(digests).encode()).hexdigest(), "summary": summary}


@contextmanager
def old_product_route():
    """Every family on its fixed route, pinned by ``SHORTRUN_ROUTE=torch`` (the ``rbm_step``
    family's fixed route; it names no route of the others), not by a timing that may pick
    another summation order."""
    from shortrun.speed import engine as routes

    before = os.environ.get("SHORTRUN_ROUTE")
    os.environ["SHORTRUN_ROUTE"] = "torch"
    routes.forget()
    try:
        yield
    finally:
        if before is None:
            del os.environ["SHORTRUN_ROUTE"]
        else:
            os.environ["SHORTRUN_ROUTE"] = before
        routes.forget()


@contextmanager
def fixed_routes():
    """``train.routes: fixed`` with no ``SHORTRUN_ROUTE*`` pin: the policy alone (issue 42)."""
    from shortrun.speed import engine as routes

    pins = [k for k in os.environ if k.startswith("SHORTRUN_ROUTE")]
    saved = {k: os.environ.pop(k) for k in pins}
    routes.forget()
    try:
        yield
    finally:
        os.environ.update(saved)
        routes.forget()


def run_recipe(recipe: str, fixed: bool = False) -> dict:
    """Train ``recipe`` for ``STEPS`` steps at the tiny size; fingerprint the model state.
    ``fixed``: under ``train.routes=fixed`` instead of the pinned routes."""
    from shortrun.train.config import resolve
    from shortrun.train.trainer import Trainer

    cfg = resolve(recipe, [*tiny_overrides(recipe), *(["train.routes=fixed"] if fixed else [])])
    data = tiny_data(cfg)
    with tempfile.TemporaryDirectory() as tmp, (fixed_routes() if fixed else old_product_route()):
        trainer = Trainer(cfg, Path(tmp) / "run", data=data)
        trainer.fit()
        state = trainer.model.state_dict()
        trainer.close()
    return fingerprint_state(state)


def all_recipes() -> list[str]:
    from shortrun.train.config import list_recipes

    return [name for name, _ in list_recipes()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="write fingerprints.json")
    ap.add_argument("--add-machine", action="store_true",
                    help="add this machine's exact digests of every recorded recipe (the code "
                         "must be the recorded code: each summary must agree with the record)")
    ap.add_argument("--fixed-routes", action="store_true",
                    help="check that every recipe (or those named) trained with "
                         "train.routes=fixed and no SHORTRUN_ROUTE pin gives its recorded "
                         "exact digest on this machine")
    ap.add_argument("recipes", nargs="*")
    args = ap.parse_args()
    if args.add_machine:
        add_machine()
        return
    if args.fixed_routes:
        check_fixed_routes(args.recipes or all_recipes())
        return
    names = args.recipes or all_recipes()
    out = {"machine": machine_key(), "steps": STEPS, "batch": BATCH, "recipes": {}}
    if RECORD.exists():
        old = json.loads(RECORD.read_text())
        if args.recipes:  # the other recipes' digests, here and elsewhere, are of unchanged code
            out["recipes"] = old["recipes"]
            elsewhere = {m: {r: d for r, d in digests.items() if r not in names}
                         for m, digests in old.get("exact_elsewhere", {}).items()}
            if any(elsewhere.values()):
                out["exact_elsewhere"] = {m: d for m, d in elsewhere.items() if d}
    for name in names:
        out["recipes"][name] = run_recipe(name)
        print(name, out["recipes"][name]["exact"][:16], flush=True)
    if args.record:
        RECORD.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


def summaries_agree(got: list, want: list, rel: float) -> str | None:
    """Why two summaries differ beyond ``rel`` per tensor (Σx relative to Σ|x|), or None."""
    if len(got) != len(want):
        return "a tensor was added or removed"
    for (shape_g, sum_g, abs_g), (shape_w, sum_w, abs_w) in zip(got, want, strict=True):
        if shape_g != shape_w:
            return f"shape {shape_g} != {shape_w}"
        scale = max(abs_w, 1e-12)
        if abs(sum_g - sum_w) > rel * scale or abs(abs_g - abs_w) > rel * scale:
            return f"tensor of shape {shape_w}: Σx {sum_g} vs {sum_w}, Σ|x| {abs_g} vs {abs_w}"
    return None


# On another CPU: the model's total Σ|x| to 1e-3 and each tensor's Σ|x| to 0.25. Measured on an
# AVX2 AMD EPYC against the AVX-512 record: at most 3.2e-4 and 0.14 (dual_mcmc_celeba64); a
# tensor whose true gradient is zero (a bias before a normalisation) takes Adam steps of ±lr
# from rounding noise, so its Σx can even change sign there.
TOTAL_ELSEWHERE, TENSOR_ELSEWHERE = 1e-3, 0.25


def summaries_agree_elsewhere(got: list, want: list) -> str | None:
    """Why two summaries from different CPUs differ beyond rounding-driven drift, or None."""
    why = summaries_agree(got, want, float("inf"))  # shapes and tensor count
    if why:
        return why
    total_g, total_w = (sum(a for _, _, a in s) for s in (got, want))
    if abs(total_g - total_w) > TOTAL_ELSEWHERE * total_w:
        return f"total Σ|x| {total_g} vs {total_w}"
    for (_, _, abs_g), (shape, _, abs_w) in zip(got, want, strict=True):
        if abs(abs_g - abs_w) > TENSOR_ELSEWHERE * max(abs_w, 1e-12):
            return f"tensor of shape {shape}: Σ|x| {abs_g} vs {abs_w}"
    return None


def check_fixed_routes(names: list[str]) -> None:
    record = json.loads(RECORD.read_text())
    here = machine_key()
    exact = ({r: d["exact"] for r, d in record["recipes"].items()} if here == record["machine"]
             else record.get("exact_elsewhere", {}).get(here))
    if not exact:
        raise SystemExit(f"no exact digests recorded for {here}")
    changed = []
    for name in names:
        same = run_recipe(name, fixed=True)["exact"] == exact[name]
        changed += [] if same else [name]
        print(name, "identical" if same else "CHANGED", flush=True)
    if changed:
        raise SystemExit(f"changed under train.routes=fixed: {', '.join(changed)}")


def add_machine() -> None:
    record = json.loads(RECORD.read_text())
    here = machine_key()
    if here == record["machine"]:
        raise SystemExit(f"{here} is the recording machine; nothing to add")
    digests = {}
    for name, want in sorted(record["recipes"].items()):
        got = run_recipe(name)
        why = summaries_agree_elsewhere(got["summary"], want["summary"])
        if why:
            raise SystemExit(f"{name}: {why}; not the recorded behaviour, nothing written")
        digests[name] = got["exact"]
        print(name, got["exact"][:16], flush=True)
    record.setdefault("exact_elsewhere", {})[here] = digests
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
