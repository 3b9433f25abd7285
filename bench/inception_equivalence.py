"""shortrun's FID Inception vs pytorch-fid's, with the same (random) weights: outputs and speed.

The real ``pt_inception-2015-12-05`` file cannot be fetched here, so both networks get one
random state dict of that file's layout. pytorch-fid's loader is pointed at it instead of the
download. Equal outputs show that shortrun's blocks, pooling quirks, resize and input scaling
match the reference forward pass. Only the numbers inside the real file remain unchecked.
The same check runs in the test suite without pytorch-fid or torchvision, against an
independent re-implementation of its forward (tests/metrics/test_inception_reference.py).

Needs a throwaway env with pytorch-fid and torchvision (never a project dependency):

    /work/main/.venv/bin/python -m venv --system-site-packages /tmp/benchenv7
    echo "$(/work/main/.venv/bin/python -c 'import site;print(site.getsitepackages()[0])')" \
        > /tmp/benchenv7/lib/python3.11/site-packages/zz_mainvenv.pth
    /tmp/benchenv7/bin/pip install --no-deps torchvision==0.28.0 pytorch-fid==0.3.0
    # the PyPI torchvision wheel's C ops do not load against CPU torch; disable them:
    mv /tmp/benchenv7/lib/python3.11/site-packages/torchvision/_C.so{,.disabled}
    PYTHONPATH=src /tmp/benchenv7/bin/python bench/inception_equivalence.py
"""

from __future__ import annotations

import time

import torch

# torchvision registers fake kernels for its detection ops at import; with its C extension
# disabled those ops must exist first. Inception uses none of them.
_lib = torch.library.Library("torchvision", "DEF")
_lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

import pytorch_fid.inception as ref  # noqa: E402

from shortrun.metrics.inception import FIDInceptionV3  # noqa: E402


def random_state(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = {}
    for k, v in net.state_dict().items():
        if k.endswith("running_var"):
            out[k] = torch.rand(v.shape, generator=g) + 0.5
        elif v.is_floating_point():
            out[k] = torch.randn(v.shape, generator=g) * 0.05
        else:
            out[k] = v
    return out


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    torch.set_num_threads(1)
    ours = FIDInceptionV3().eval()
    state = random_state(ours)
    ours.load_state_dict(state)
    ref.load_state_dict_from_url = lambda *a, **k: state  # no download: our random file
    theirs = ref.InceptionV3([3]).eval()
    x = torch.rand(4, 3, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = ours(x)
        b = theirs(x)[0].flatten(1)
        rel = float((a - b).abs().max() / b.abs().max())
        print(f"max |ours - pytorch-fid| / max |pytorch-fid| = {rel:.3e} over {tuple(a.shape)}")
        print(f"keys identical: {sorted(ours.state_dict()) == sorted(state)}")
        t_ours, t_ref = float("inf"), float("inf")
        for _ in range(5):  # interleaved, so load changes on the shared CPU hit both sides
            t_ref = min(t_ref, best_of(lambda: theirs(x), 1))
            t_ours = min(t_ours, best_of(lambda: ours(x), 1))
    print(f"forward of 4 images (28x28 -> 299x299), best of 5 interleaved, 1 thread: shortrun "
          f"{t_ours:.3f} s, "
          f"pytorch-fid {t_ref:.3f} s, ratio ref/ours {t_ref / t_ours:.2f}")


if __name__ == "__main__":
    main()
