"""A user's array as a dataset through ``shortrun.infer_info`` / ``array_data`` (the ones
``shortrun.fit`` uses): the DataInfo read off its values, and clear refusals."""

import numpy as np
import pytest
import torch

import shortrun
from shortrun.data.array import array_data, infer_info
from shortrun.errors import DataError


def test_the_public_names_are_the_data_floors_functions():
    assert shortrun.infer_info is infer_info and shortrun.array_data is array_data


def test_kinds_are_read_off_the_values():
    assert infer_info(np.array([[0, 1, 1], [1, 0, 0]])).kind == "binary"
    vec = infer_info(torch.randn(10, 3))
    assert (vec.kind, vec.shape) == ("vector", (3,))
    img = infer_info(torch.linspace(-0.5, 2.0, 2 * 3 * 4 * 4).reshape(2, 3, 4, 4))
    # images go onto the model's [-1, 1]; the map back is the observed range [-0.5, 2]
    assert (img.kind, img.shape, img.low, img.high) == ("image", (3, 4, 4), -1.0, 1.0)
    assert img.raw_scale == pytest.approx(1.25) and img.raw_offset == pytest.approx(0.75)


@pytest.mark.parametrize("x, message", [
    (torch.randn(5), r"expected N examples"),
    (torch.tensor([[0.0, float("nan")]]), r"NaN or infinite"),
    ([[1.0, 2.0]], r"expected a torch.Tensor or numpy.ndarray; got list"),
])
def test_unusable_arrays_are_refused_with_what_was_expected(x, message):
    with pytest.raises(DataError, match=message):
        infer_info(x)


def test_loaded_data_is_the_default_dtype_and_checks_the_test_split():
    data = array_data(np.zeros((4, 2), dtype=np.float64) + 0.5, np.ones((2, 2)))
    assert data.train.dtype == torch.get_default_dtype() and data.test.shape == (2, 2)
    with pytest.raises(DataError, match=r"x_test: examples shaped \(3,\)"):
        array_data(np.zeros((4, 2)) + 0.5, np.ones((2, 3)))
