import pytest

from shortrun.errors import ConfigError
from shortrun.train.config import apply_overrides, build_config, load_recipe, resolve


def test_default_recipe_resolves():
    cfg = resolve(None)
    assert cfg.recipe == "ebm_8gaussians"
    assert cfg.model.name == "ebm" and cfg.data.name == "8gaussians"
    assert cfg.train.steps > 0


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.batch_size=0", "train.batch_size: must be > 0; got 0"),
        ("model.step_size=-0.1", "model.step_size: must be > 0; got -0.1"),
        ("model.langevin_steps=0", "model.langevin_steps: must be > 0; got 0"),
        ("train.lr=fast", "train.lr: expected a number; got 'fast'"),
        ("train.batch_size=1.5", "train.batch_size: expected an integer; got 1.5"),
        ("train.progress=maybe", "train.progress: expected true or false; got 'maybe'"),
        ("model.chain=magic", "model.chain: must be one of"),
        ("train.batchsize=3", "unknown key 'train.batchsize'. Did you mean train.batch_size?"),
        ("training.lr=3", "unknown section 'training'"),
        ("lr=3", "the key must be SECTION.NAME"),
        ("train.lr", "expected KEY=VALUE"),
        ("model.name=nope", "model.name: unknown model 'nope'"),
        ("data.name=mnits", "Did you mean mnist"),
    ],
)
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        resolve(None, [override])
    assert message in str(err.value)


def test_float_from_exponent_string():
    assert resolve(None, ["train.lr=1e-4"]).train.lr == pytest.approx(1e-4)


def test_steps_override_clears_recipe_epochs():
    _, raw = load_recipe(None)
    raw["train"]["epochs"], raw["train"]["steps"] = 3, None
    cfg = build_config(apply_overrides(raw, ["train.steps=7"]))
    assert cfg.train.steps == 7 and cfg.train.epochs is None
    cfg = build_config(apply_overrides(raw, ["train.epochs=2"]))
    assert cfg.train.epochs == 2 and cfg.train.steps is None


def test_unknown_recipe_suggests():
    with pytest.raises(ConfigError, match="unknown recipe 'ebm_8gausians'. Did you mean"):
        resolve("ebm_8gausians")


def test_round_trip_through_dict():
    cfg = resolve(None, ["train.seed=3"])
    again = build_config(cfg.to_dict())
    assert again == cfg
