"""The LEBM generator's first layer (:class:`shortrun.models.lebm_nets.LatentProjection`) by its
measured ``deconv`` route (``gemm`` or ``conv``, printed) against the plain transposed
convolution (``nn.ConvTranspose2d`` with the same weights),
in one process, interleaved: the layer alone (forward plus the latent's gradient, what each of
the posterior chain's 20 steps runs), and a whole ``lebm_svhn`` iteration at the official
defaults with the generator's first layer swapped. The generator's layout is the one the conv
route picks (``model.channels_last: auto``) unless ``--layout`` pins it.

    python bench/lebm_projection_speed.py --threads 1 --repeats 5
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from lebm_speed import SVHN
from speed_common import interleave, timed
from torch import nn

from shortrun.hardware import cpu_model, cpu_signature
from shortrun.models.base import OptimOptions
from shortrun.models.lebm_nets import LatentProjection
from shortrun.models.registry import build_model
from shortrun.speed.layout import FORMATS, chain_step, settle_layouts
from shortrun.train.config import resolve


def as_convolution(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose generator starts with the plain transposed convolution."""
    twin = copy.deepcopy(model)
    first = twin.generator.net[0]
    assert isinstance(first, LatentProjection)
    conv = nn.ConvTranspose2d(first.in_channels, first.out_channels, first.kernel_size,
                              first.stride, first.padding)
    conv.load_state_dict(first.state_dict())
    twin.generator.net[0] = conv.to(memory_format=twin.generator.memory_format)
    return twin


def line(what: str, times: dict[str, list[float]], unit: float, label: str) -> str:
    g, c = times["gemm"], times["convolution"]
    return (f"| {what} | {min(g) * unit:.2f} / {min(c) * unit:.2f} {label} = "
            f"**{min(c) / min(g):.2f}×** (medians {statistics.median(g) * unit:.2f} / "
            f"{statistics.median(c) * unit:.2f}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    pin = [] if args.layout == "auto" else [f"model.channels_last={args.layout == 'nhwc'}"]
    cfg = resolve("lebm_svhn", [f"train.batch_size={args.batch}", *pin])
    x = torch.rand(args.batch, 3, 32, 32) * 2 - 1
    ours = build_model(cfg, SVHN)
    settle_layouts(ours, args.batch)  # the layout: pinned, measured or cached
    conv = as_convolution(ours)
    layout = ours.generator.layout
    print(f"{cpu_model()} ({cpu_signature()}); torch {torch.__version__}; {args.threads} "
          f"thread(s); batch {args.batch}; generator layout {layout}; best of {args.repeats}, "
          "interleaved")
    print("| what | measured route / convolution |")
    print("|---|---|")
    z = torch.randn(args.batch, cfg.model.nz, 1, 1).contiguous(memory_format=FORMATS[layout])
    layers = {"gemm": ours.generator.net[0], "convolution": conv.generator.net[0]}
    for layer in layers.values():
        layer.requires_grad_(False)
    with torch.no_grad():
        target = layers["gemm"](z)
    sides = {k: timed(lambda m=m: chain_step(m, z, target)) for k, m in layers.items()}
    times = interleave(sides, 10 * args.repeats)
    route = next(iter(layers["gemm"].__dict__.get("_routes", {}).values())).name
    print(line(f"first layer, forward + latent gradient (route {route})", times, 1e3, "ms"),
          flush=True)
    for layer in layers.values():
        layer.requires_grad_(True)
    step = [0]
    models = {"gemm": ours, "convolution": conv}
    opts = {k: m.configure_training(OptimOptions.from_train(cfg.train)) for k, m in models.items()}

    def iteration(name: str) -> None:
        models[name].training_step(x, step[0], opts[name])

    times = interleave({k: timed(lambda k=k: iteration(k)) for k in models}, args.repeats)
    print(line("`lebm_svhn` iteration, official defaults", times, 1, "s"), flush=True)


if __name__ == "__main__":
    main()
