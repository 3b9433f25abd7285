"""train.precision=bf16 and train.compile=true each train on CPU and keep checkpoints loadable."""

import pytest
import torch

from shortrun.hardware import bf16_missing
from shortrun.run import load_run
from shortrun.train.config import resolve
from shortrun.train.trainer import Trainer


def _train(tmp_path, overrides, extra):
    cfg = resolve(None, [*overrides, *extra, "train.steps=6"])
    result = Trainer(cfg, tmp_path / "run").fit()
    assert result.step == 6
    assert all(torch.isfinite(torch.tensor(v)) for v in result.metrics.values())
    return load_run(tmp_path / "run")


needs_native_bf16 = pytest.mark.skipif(
    bf16_missing("cpu") is not None,
    reason=f"train.precision=bf16 is refused here: no native bf16 ({bf16_missing('cpu')})")


@needs_native_bf16
def test_bf16_autocast_trains(tmp_path, tiny_ebm_overrides):
    run = _train(tmp_path, tiny_ebm_overrides, ["train.precision=bf16"])
    assert all(p.dtype == torch.float32 for p in run.model.parameters())


@needs_native_bf16
def test_bf16_changes_the_arithmetic(tmp_path, tiny_ebm_overrides):
    a = _train(tmp_path / "a", tiny_ebm_overrides, ["train.precision=bf16"]).model
    b = _train(tmp_path / "b", tiny_ebm_overrides, []).model
    assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(),
                                                      strict=True))


def test_compiled_networks_train_and_checkpoint(tmp_path, tiny_ebm_overrides):
    run = _train(tmp_path, tiny_ebm_overrides,
                 ["train.compile=true", "train.compile_backend=aot_eager"])
    assert all("_orig_mod" not in k for k in run.model.state_dict())
