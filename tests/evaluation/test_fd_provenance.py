"""Every FD comes with its provenance: extractor and weights hash, reference, sizes, floor."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from torch import nn

from shortrun.data.base import DataInfo, LoadedData
from shortrun.evaluation import features as features_module
from shortrun.evaluation.features import model_fd_kid
from shortrun.evaluation.provenance import CACHE_ENV, cache_path, real_sample
from shortrun.metrics.features import Extractor, fd_kid, state_dict_sha256
from shortrun.metrics.frechet import frechet_distance
from shortrun.report import frechet_lines, frechet_note
from shortrun.train.config import build_config

INFO = DataInfo(shape=(1, 4, 4), kind="image", low=-1.0, high=1.0)


def fixed_net() -> nn.Module:
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    with torch.no_grad():
        net[1].weight.copy_(torch.arange(48.0).reshape(3, 16) / 48)
        net[1].bias.copy_(torch.tensor([0.5, -0.5, 0.25]))
    return net


def test_weights_hash_by_hand_and_stable():
    net = fixed_net()
    h = hashlib.sha256()
    for name, t in (("1.bias", net[1].bias), ("1.weight", net[1].weight)):  # name order
        h.update(f"{name}|torch.float32|{tuple(t.shape)}|".encode())
        h.update(t.detach().numpy().tobytes())
    assert state_dict_sha256(net) == h.hexdigest()
    copy = fixed_net()
    assert state_dict_sha256(copy) == state_dict_sha256(net)  # same weights, same hash
    with torch.no_grad():
        copy[1].bias[0] += 1e-6
    assert state_dict_sha256(copy) != state_dict_sha256(net)
    # a bound method (a classifier's .features) hashes the module it belongs to
    assert Extractor("x", net.forward, 3, INFO).weights_sha256 == state_dict_sha256(net)
    assert Extractor("x", lambda x: x.flatten(1), 16, INFO).weights_sha256 is None


@pytest.fixture
def setup(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    g = torch.Generator().manual_seed(0)
    data = LoadedData(train=torch.rand(300, 1, 4, 4, generator=g) * 2 - 1, info=INFO,
                      test=torch.rand(120, 1, 4, 4, generator=g) * 2 - 1)
    extractor = Extractor("fixed", fixed_net(), 3, INFO)
    monkeypatch.setattr(features_module, "run_extractor", lambda cfg: extractor)
    cfg = build_config({"data": {"name": "digits"}, "model": {"name": "classifier"},
                        "train": {"steps": 1},
                        "eval": {"n_samples": 50, "batch_size": 20, "seed": 3}})

    class Model:
        def sample(self, n):
            return torch.rand(n, 1, 4, 4, generator=g) * 2 - 1

    return data, extractor, cfg, Model()


def test_fd_carries_extractor_reference_sizes_and_the_real_floor(setup):
    data, extractor, cfg, model = setup
    out = model_fd_kid(model, data, cfg, ("fd",))
    assert out["fd_extractor"] == "fixed"
    assert out["fd_extractor_sha256"] == state_dict_sha256(extractor.net)
    assert (out["fd_reference"], out["fd_n_ref"], out["fd_n"]) == ("test", 120, 50)
    real = real_sample(data, 50, seed=3)
    expected = frechet_distance(extractor.features(real), extractor.features(data.test))
    assert out["fd_floor"] == pytest.approx(expected, rel=1e-12)
    assert out["fd_floor_n"] == 50 and out["fd_floor_real"] == "train"
    # the same FD as without provenance (reference features reused, not changed)
    again = fd_kid(extractor, real, data.test, INFO, ("fd",))
    assert again["fd"] == pytest.approx(expected, rel=1e-9)


def test_floor_is_cached_by_weights_and_images(setup):
    data, extractor, cfg, model = setup
    first = model_fd_kid(model, data, cfg, ("fd",))
    cache = json.loads(cache_path().read_text())
    assert list(cache.values()) == [pytest.approx(first["fd_floor"])]
    key = next(iter(cache))
    cache_path().write_text(json.dumps({key: 123.0}))  # a cached floor is read, not recomputed
    assert model_fd_kid(model, data, cfg, ("fd",))["fd_floor"] == 123.0
    data.test = data.test.flip(0)[:100]  # another reference: another key
    assert model_fd_kid(model, data, cfg, ("fd",))["fd_floor"] != 123.0
    assert len(json.loads(cache_path().read_text())) == 2


def test_kid_alone_has_no_fd_provenance(setup):
    data, _, cfg, model = setup
    assert "fd_floor" not in model_fd_kid(model, data, cfg, ("kid",))


def test_report_shows_the_provenance_beside_the_number(tmp_path):
    d = {"fd": 12.5, "fd_floor": 0.75, "fd_floor_n": 2000, "fd_extractor": "mnist",
         "fd_extractor_sha256": "abcdef0123456789", "fd_reference": "test", "fd_n": 2000,
         "fd_n_ref": 10000}
    note = frechet_note(d)
    assert note == ("floor (real vs real) 0.75 at n=2000; extractor mnist (sha256 "
                    "abcdef012345…); 2000 generated vs test split (n=10000)")
    (tmp_path / "eval.json").write_text(json.dumps(d))
    assert frechet_lines(tmp_path) == [f"fd 12.5  ({note})"]
    assert frechet_note({"fd": 1.0}) == ""  # an eval.json from before provenance


def test_floor_of_the_same_images_is_zero():
    x = np.random.default_rng(0).standard_normal((40, 3))
    assert frechet_distance(x, x) == pytest.approx(0.0, abs=1e-9)
