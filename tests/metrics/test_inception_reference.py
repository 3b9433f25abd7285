"""FID Inception forward pass against an independent re-implementation of pytorch-fid's.

What this checks: with the same (random) weights, :class:`FIDInceptionV3` computes the same
features as pytorch-fid's ``InceptionV3([3])`` (the 2048-d pool3 block, ``resize_input`` and
``normalize_input`` on), so every block, every pooling quirk, the resize and the input scaling
are exercised through the network's real code path, not only its key layout
(tests/metrics/test_inception.py). Only the numbers inside the real weights file stay unchecked.

Why a re-implementation and not pytorch-fid itself: pytorch-fid imports torchvision, which is
not a shortrun dependency and whose PyPI wheels ship C ops that do not load against every torch
build (bench/inception_equivalence.py needs a throwaway env and a workaround for that). A test
that installs nothing runs the same on any clean machine and in CI. The reference below is
written from the published architecture (Szegedy et al. 2016, Fig. 5-7 blocks, in torchvision's
``Inception3`` naming) plus pytorch-fid's FID patches (``FIDInceptionA``/``C``/``E_1``: average
pools that exclude padding; ``FIDInceptionE_2`` = ``Mixed_7c``: a max pool in the pool branch),
in a different form from the module: one function over the raw state dict, each block a table
of branches. Both run in float64, so agreement is to rounding; flipping any quirk in the
reference moves the features by far more, which shows the comparison can see each one.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from shortrun.metrics.inception import FIDInceptionV3

pytestmark = pytest.mark.slow  # a few 299x299 float64 forwards: ~20 s of CPU

# A branch is a list of steps: ("conv", name, stride, padding), ("avg",), ("max", k, s, p),
# or ("split", name_a, pad_a, name_b, pad_b): two parallel convs whose outputs are concatenated.
A_BRANCHES = [
    [("conv", "branch1x1", 1, 0)],
    [("conv", "branch5x5_1", 1, 0), ("conv", "branch5x5_2", 1, 2)],
    [("conv", "branch3x3dbl_1", 1, 0), ("conv", "branch3x3dbl_2", 1, 1),
     ("conv", "branch3x3dbl_3", 1, 1)],
    [("avg",), ("conv", "branch_pool", 1, 0)],
]
B_BRANCHES = [
    [("conv", "branch3x3", 2, 0)],
    [("conv", "branch3x3dbl_1", 1, 0), ("conv", "branch3x3dbl_2", 1, 1),
     ("conv", "branch3x3dbl_3", 2, 0)],
    [("max", 3, 2, 0)],
]
ROW, COL = (0, 3), (3, 0)  # padding of the 1x7 and 7x1 convolutions
C_BRANCHES = [
    [("conv", "branch1x1", 1, 0)],
    [("conv", "branch7x7_1", 1, 0), ("conv", "branch7x7_2", 1, ROW),
     ("conv", "branch7x7_3", 1, COL)],
    [("conv", "branch7x7dbl_1", 1, 0), ("conv", "branch7x7dbl_2", 1, COL),
     ("conv", "branch7x7dbl_3", 1, ROW), ("conv", "branch7x7dbl_4", 1, COL),
     ("conv", "branch7x7dbl_5", 1, ROW)],
    [("avg",), ("conv", "branch_pool", 1, 0)],
]
D_BRANCHES = [
    [("conv", "branch3x3_1", 1, 0), ("conv", "branch3x3_2", 2, 0)],
    [("conv", "branch7x7x3_1", 1, 0), ("conv", "branch7x7x3_2", 1, ROW),
     ("conv", "branch7x7x3_3", 1, COL), ("conv", "branch7x7x3_4", 2, 0)],
    [("max", 3, 2, 0)],
]


def e_branches(pool: tuple) -> list:
    return [
        [("conv", "branch1x1", 1, 0)],
        [("conv", "branch3x3_1", 1, 0), ("split", "branch3x3_2a", (0, 1), "branch3x3_2b", (1, 0))],
        [("conv", "branch3x3dbl_1", 1, 0), ("conv", "branch3x3dbl_2", 1, 1),
         ("split", "branch3x3dbl_3a", (0, 1), "branch3x3dbl_3b", (1, 0))],
        [pool, ("conv", "branch_pool", 1, 0)],
    ]


def reference_forward(state: dict[str, torch.Tensor], x: torch.Tensor, *,
                      pad_in_average: bool = False, mixed_7c_pool: str = "max",
                      normalize: bool = True) -> torch.Tensor:
    """pytorch-fid's ``InceptionV3([3], resize_input=True, normalize_input=True)`` forward.

    The keyword arguments undo one FID quirk each (defaults: the FID graph)."""

    def conv(name: str, h: torch.Tensor, stride, padding) -> torch.Tensor:
        h = F.conv2d(h, state[f"{name}.conv.weight"], stride=stride, padding=padding)
        h = F.batch_norm(h, state[f"{name}.bn.running_mean"], state[f"{name}.bn.running_var"],
                         state[f"{name}.bn.weight"], state[f"{name}.bn.bias"], training=False,
                         eps=0.001)
        return F.relu(h)

    def run_block(block: str, branches: list, h: torch.Tensor) -> torch.Tensor:
        outs = []
        for branch in branches:
            y = h
            for step in branch:
                if step[0] == "conv":
                    y = conv(f"{block}.{step[1]}", y, step[2], step[3])
                elif step[0] == "avg":
                    y = F.avg_pool2d(y, 3, stride=1, padding=1,
                                     count_include_pad=pad_in_average)
                elif step[0] == "max":
                    y = F.max_pool2d(y, step[1], stride=step[2], padding=step[3])
                else:  # split
                    y = torch.cat([conv(f"{block}.{step[1]}", y, 1, step[2]),
                                   conv(f"{block}.{step[3]}", y, 1, step[4])], 1)
            outs.append(y)
        return torch.cat(outs, 1)

    h = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
    if normalize:
        h = 2 * h - 1  # [0, 1] -> [-1, 1]
    h = conv("Conv2d_1a_3x3", h, 2, 0)
    h = conv("Conv2d_2a_3x3", h, 1, 0)
    h = conv("Conv2d_2b_3x3", h, 1, 1)
    h = F.max_pool2d(h, 3, stride=2)
    h = conv("Conv2d_3b_1x1", h, 1, 0)
    h = conv("Conv2d_4a_3x3", h, 1, 0)
    h = F.max_pool2d(h, 3, stride=2)
    for block in ("Mixed_5b", "Mixed_5c", "Mixed_5d"):
        h = run_block(block, A_BRANCHES, h)
    h = run_block("Mixed_6a", B_BRANCHES, h)
    for block in ("Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):
        h = run_block(block, C_BRANCHES, h)
    h = run_block("Mixed_7a", D_BRANCHES, h)
    h = run_block("Mixed_7b", e_branches(("avg",)), h)
    last_pool = ("max", 3, 1, 1) if mixed_7c_pool == "max" else ("avg",)
    h = run_block("Mixed_7c", e_branches(last_pool), h)
    return F.adaptive_avg_pool2d(h, (1, 1)).flatten(1)


def random_state(net: torch.nn.Module, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights of the file's layout, scaled so that activations neither vanish nor
    explode through the ~95 layers (He-scaled convolutions, BatchNorm near identity)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in net.state_dict().items():
        if key.endswith("conv.weight"):
            fan_in = value[0].numel()
            out[key] = torch.randn(value.shape, generator=g) * (2.0 / fan_in) ** 0.5
        elif key.endswith("running_var"):
            out[key] = torch.rand(value.shape, generator=g) + 0.5
        elif key.endswith("bn.weight"):
            out[key] = 1 + 0.1 * torch.randn(value.shape, generator=g)
        elif value.is_floating_point():
            out[key] = 0.1 * torch.randn(value.shape, generator=g)
        else:
            out[key] = value
    return {k: v.double() if v.is_floating_point() else v for k, v in out.items()}


@pytest.fixture(scope="module")
def nets():
    net = FIDInceptionV3().double().eval()
    state = random_state(net)
    net.load_state_dict(state)
    # 32x32 (CIFAR size) and a non-square 28x20 image: both go through the 299x299 resize
    g = torch.Generator().manual_seed(1)
    images = [torch.rand(2, 3, 32, 32, generator=g, dtype=torch.float64),
              torch.rand(1, 3, 28, 20, generator=g, dtype=torch.float64)]
    with torch.no_grad():
        refs = [reference_forward(state, x) for x in images]
    return net, state, images, refs


@torch.no_grad()
def test_forward_equals_the_pytorch_fid_reference(nets):
    net, _, images, refs = nets
    for x, ref in zip(images, refs, strict=True):
        ours = net(x)
        assert ours.shape == (x.shape[0], 2048)
        assert ref.std() > 1e-3 * ref.abs().max(), "degenerate features would prove nothing"
        torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12 * float(ref.abs().max()))


@torch.no_grad()
def test_grayscale_images_are_the_channel_repeated(nets):
    net, state, _, _ = nets
    x = torch.rand(1, 1, 28, 28, generator=torch.Generator().manual_seed(2),
                   dtype=torch.float64)
    torch.testing.assert_close(net(x), reference_forward(state, x.repeat(1, 3, 1, 1)),
                               rtol=1e-9, atol=1e-12)


@torch.no_grad()
@pytest.mark.parametrize("quirk", [{"pad_in_average": True}, {"mixed_7c_pool": "avg"},
                                   {"normalize": False}])
def test_each_quirk_is_visible_in_the_features(nets, quirk):
    """Undoing one FID quirk in the reference moves the features far beyond rounding, so the
    equality above really pins each of them."""
    _, state, images, refs = nets
    x, fid = images[1], refs[1]
    other = reference_forward(state, x, **quirk)
    assert float((other - fid).abs().max()) > 1e-4 * float(fid.abs().max())
