"""FID Inception: the layout matches the pt_inception-2015-12-05 file, loading is offline-only.

The real weights cannot be fetched here, so the key/shape table below is written out from the
reference layout (torchvision's Inception3 with 1008 classes and no aux head, as patched by
pytorch-fid's ``fid_inception_v3``) independently of the module, and the module is checked
against it.
"""

from __future__ import annotations

import pytest
import torch

from shortrun.errors import DataError
from shortrun.evaluation.features import load_extractor
from shortrun.metrics.inception import (
    WEIGHTS_NAME,
    FIDInceptionV3,
    _tf_avg_pool,
    load_inception_extractor,
)


def _reference_convs() -> dict[str, tuple[int, int, int, int]]:
    """``prefix -> (out, in, kh, kw)`` of every BasicConv2d in the reference layout."""
    convs = {"Conv2d_1a_3x3": (32, 3, 3, 3), "Conv2d_2a_3x3": (32, 32, 3, 3),
             "Conv2d_2b_3x3": (64, 32, 3, 3), "Conv2d_3b_1x1": (80, 64, 1, 1),
             "Conv2d_4a_3x3": (192, 80, 3, 3)}
    for name, c, pool in (("Mixed_5b", 192, 32), ("Mixed_5c", 256, 64), ("Mixed_5d", 288, 64)):
        convs.update({f"{name}.branch1x1": (64, c, 1, 1), f"{name}.branch5x5_1": (48, c, 1, 1),
                      f"{name}.branch5x5_2": (64, 48, 5, 5),
                      f"{name}.branch3x3dbl_1": (64, c, 1, 1),
                      f"{name}.branch3x3dbl_2": (96, 64, 3, 3),
                      f"{name}.branch3x3dbl_3": (96, 96, 3, 3),
                      f"{name}.branch_pool": (pool, c, 1, 1)})
    convs.update({"Mixed_6a.branch3x3": (384, 288, 3, 3),
                  "Mixed_6a.branch3x3dbl_1": (64, 288, 1, 1),
                  "Mixed_6a.branch3x3dbl_2": (96, 64, 3, 3),
                  "Mixed_6a.branch3x3dbl_3": (96, 96, 3, 3)})
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        convs.update({f"{name}.branch1x1": (192, 768, 1, 1),
                      f"{name}.branch7x7_1": (c7, 768, 1, 1),
                      f"{name}.branch7x7_2": (c7, c7, 1, 7),
                      f"{name}.branch7x7_3": (192, c7, 7, 1),
                      f"{name}.branch7x7dbl_1": (c7, 768, 1, 1),
                      f"{name}.branch7x7dbl_2": (c7, c7, 7, 1),
                      f"{name}.branch7x7dbl_3": (c7, c7, 1, 7),
                      f"{name}.branch7x7dbl_4": (c7, c7, 7, 1),
                      f"{name}.branch7x7dbl_5": (192, c7, 1, 7),
                      f"{name}.branch_pool": (192, 768, 1, 1)})
    convs.update({"Mixed_7a.branch3x3_1": (192, 768, 1, 1),
                  "Mixed_7a.branch3x3_2": (320, 192, 3, 3),
                  "Mixed_7a.branch7x7x3_1": (192, 768, 1, 1),
                  "Mixed_7a.branch7x7x3_2": (192, 192, 1, 7),
                  "Mixed_7a.branch7x7x3_3": (192, 192, 7, 1),
                  "Mixed_7a.branch7x7x3_4": (192, 192, 3, 3)})
    for name, c in (("Mixed_7b", 1280), ("Mixed_7c", 2048)):
        convs.update({f"{name}.branch1x1": (320, c, 1, 1),
                      f"{name}.branch3x3_1": (384, c, 1, 1),
                      f"{name}.branch3x3_2a": (384, 384, 1, 3),
                      f"{name}.branch3x3_2b": (384, 384, 3, 1),
                      f"{name}.branch3x3dbl_1": (448, c, 1, 1),
                      f"{name}.branch3x3dbl_2": (384, 448, 3, 3),
                      f"{name}.branch3x3dbl_3a": (384, 384, 1, 3),
                      f"{name}.branch3x3dbl_3b": (384, 384, 3, 1),
                      f"{name}.branch_pool": (192, c, 1, 1)})
    return convs


def _reference_state_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {"fc.weight": (1008, 2048), "fc.bias": (1008,)}
    for prefix, shape in _reference_convs().items():
        shapes[f"{prefix}.conv.weight"] = shape
        for stat in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.bn.{stat}"] = (shape[0],)
        shapes[f"{prefix}.bn.num_batches_tracked"] = ()
    return shapes


@pytest.fixture(scope="module")
def net() -> FIDInceptionV3:
    return FIDInceptionV3().eval()


def test_state_dict_matches_reference_layout(net):
    ours = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    reference = _reference_state_shapes()
    assert len(_reference_convs()) == 94
    assert ours == reference


def test_fid_quirks(net):
    # TF-style average pool: a constant map stays constant at the borders.
    ones = torch.ones(1, 1, 5, 5)
    assert torch.equal(_tf_avg_pool(ones), ones)
    assert net.Mixed_7c.max_pool and not net.Mixed_7b.max_pool
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            assert m.eps == pytest.approx(1e-3)


def test_weights_file_round_trip_and_features(net, tmp_path):
    # A file with this layout (random values, and without BatchNorm counters like the
    # original pre-0.4.1 file) loads and yields 2048-d features for a grayscale batch.
    torch.manual_seed(0)
    state = {k: (torch.randn_like(v) * 0.05 if v.is_floating_point() else v)
             for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    state = {k: (v.abs() + 0.5 if k.endswith("running_var") else v) for k, v in state.items()}
    path = tmp_path / WEIGHTS_NAME
    torch.save(state, path)
    extractor = load_extractor(f"inception:{path}")
    assert extractor.dim == 2048
    from shortrun.data.base import DataInfo

    mnist_info = DataInfo(shape=(1, 28, 28), kind="image", low=-1.0, high=1.0)
    feats = extractor(torch.rand(2, 1, 28, 28) * 2 - 1, mnist_info)
    assert feats.shape == (2, 2048) and torch.isfinite(feats).all()
    loaded = load_inception_extractor(str(path)).net.state_dict()
    assert torch.equal(loaded["Mixed_6e.branch7x7dbl_5.conv.weight"],
                       state["Mixed_6e.branch7x7dbl_5.conv.weight"])


def test_missing_file_says_where_to_get_it(tmp_path):
    with pytest.raises(DataError, match=f"not found at .*{WEIGHTS_NAME}.*download "
                                        f".*releases/download/fid_weights.*never downloads"):
        load_extractor(f"inception:{tmp_path / WEIGHTS_NAME}")


def test_wrong_file_is_refused(tmp_path):
    path = tmp_path / "other.pth"
    torch.save({"fc.weight": torch.zeros(3, 3)}, path)
    with pytest.raises(DataError, match="is not the FID Inception weights file"):
        load_extractor(f"inception:{path}")
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(DataError, match="not a readable weights file"):
        load_extractor(f"inception:{junk}")
