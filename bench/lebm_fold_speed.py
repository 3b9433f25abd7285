"""The LEBM generator's last layer by its measured ``deconv`` route
(:mod:`shortrun.models.fold_routes`: oneDNN's transposed convolution or a GEMM and a col2im)
against the plain ``nn.ConvTranspose2d`` with the same weights, in one process, interleaved:
the layer alone (forward plus the input's gradient, what each posterior-chain step runs) and a
whole training iteration of each recipe. Needs ``SHORTRUN_DATA`` for the MNIST recipes.

    SHORTRUN_DATA=/work/shared/data python bench/lebm_fold_speed.py --threads 1 --repeats 10
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from lebm_speed import SVHN
from speed_common import interleave, timed
from torch import nn

from shortrun.data.registry import load_data
from shortrun.hardware import cpu_model, cpu_signature
from shortrun.models.base import OptimOptions
from shortrun.models.registry import build_model
from shortrun.speed.deconv import ImageLayer
from shortrun.speed.layout import settle_layouts
from shortrun.train.config import resolve


def with_plain_last_layer(model: nn.Module) -> nn.Module:
    twin = copy.deepcopy(model)
    net = twin.generator.net
    [i] = [i for i, m in enumerate(net) if isinstance(m, ImageLayer)]
    last = net[i]
    plain = nn.ConvTranspose2d(last.in_channels, last.out_channels, last.kernel_size,
                               last.stride, last.padding)
    plain.load_state_dict(last.state_dict())
    net[i] = plain.to(memory_format=twin.generator.memory_format)
    return twin


def compare(recipe: str, repeats: int) -> list[str]:
    cfg = resolve(recipe, ["data.n_train=1000"] if "mnist" in recipe else [])
    b = cfg.train.batch_size
    if "svhn" in recipe:  # synthetic, as bench/lebm_speed.py: no SVHN files are needed
        info, x = SVHN, torch.rand(b, *SVHN.shape) * 2 - 1
    else:
        data = load_data(cfg.data)
        info, x = data.info, data.train[:b]
    torch.manual_seed(0)
    ours = build_model(cfg, info)
    settle_layouts(ours, b)  # channels_last: auto, as the Trainer settles it
    plain = with_plain_last_layer(ours)
    models = {"route": ours, "convolution": plain}
    # the last layer alone, on the input the generator gives it
    feats = {}
    for name, m in models.items():
        net = m.generator.net
        z = torch.randn(b, cfg.model.nz, 1, 1).contiguous(memory_format=m.generator.memory_format)
        with torch.no_grad():
            h = net[:-2](z)
        layer = net[-2]
        feats[name] = (layer, h)

    def layer_call(name: str) -> None:
        layer, h = feats[name]
        with torch.enable_grad():
            hg = h.detach().requires_grad_(True)
            y = layer(hg)
            torch.autograd.grad(y, hg, torch.ones_like(y))

    t_layer = interleave({k: timed(lambda k=k: layer_call(k)) for k in models}, 10 * repeats)
    route = next(iter(feats["route"][0].__dict__.get("_routes", {}).values())).name
    opts = {k: m.configure_training(OptimOptions.from_train(cfg.train)) for k, m in models.items()}
    step = [0]

    def iteration(name: str) -> None:
        models[name].training_step(x, step[0], opts[name])

    t_iter = interleave({k: timed(lambda k=k: iteration(k)) for k in models}, repeats)
    out = []
    for what, times, unit, label in (("last layer, forward + input gradient", t_layer, 1e3, "ms"),
                                     ("training iteration", t_iter, 1, "s")):
        r, c = times["route"], times["convolution"]
        out.append(f"| {recipe} | {what} (route {route}, layout {ours.generator.layout}) | "
                   f"{min(r) * unit:.3g} / {min(c) * unit:.3g} {label} = **{min(c) / min(r):.2f}×**"
                   f" (medians {statistics.median(r) * unit:.3g} / "
                   f"{statistics.median(c) * unit:.3g}) |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--recipes", nargs="+",
                    default=["lebm_mnist_anomaly", "damc_mnist_anomaly", "lebm_svhn"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{cpu_model()} ({cpu_signature()}); torch {torch.__version__}; {args.threads} "
          f"thread(s); best of {args.repeats} iterations, interleaved")
    print("| recipe | what | measured route / plain convolution |")
    print("|---|---|---|")
    for recipe in args.recipes:
        for line in compare(recipe, args.repeats):
            print(line, flush=True)


if __name__ == "__main__":
    main()
