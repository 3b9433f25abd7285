"""A user's array as a dataset: the DataInfo read off its values, and clear refusals."""

import numpy as np
import pytest
import torch

from shortrun.data.infer import infer_info, loaded_from_array
from shortrun.errors import DataError


def test_kinds_are_read_off_the_values():
    assert infer_info(np.array([[0, 1, 1], [1, 0, 0]])).kind == "binary"
    vec = infer_info(torch.randn(10, 3))
    assert (vec.kind, vec.shape) == ("vector", (3,))
    img = infer_info(torch.linspace(-0.5, 2.0, 2 * 3 * 4 * 4).reshape(2, 3, 4, 4))
    assert (img.kind, img.shape, img.low, img.high) == ("image", (3, 4, 4), -0.5, 2.0)


@pytest.mark.parametrize("x, message", [
    (torch.randn(5), r"expected examples along the first axis"),
    (torch.randn(5, 28, 28), r"add a channel axis to images \(x\[:, None\]\)"),
    (torch.tensor([[0.0, float("nan")]]), r"NaN or infinite"),
    ([[1.0, 2.0]], r"expected a torch tensor or NumPy array; got list"),
])
def test_unusable_arrays_are_refused_with_what_was_expected(x, message):
    with pytest.raises(DataError, match=message):
        infer_info(x)


def test_loaded_data_is_float32_and_checks_the_test_split():
    data = loaded_from_array(np.zeros((4, 2), dtype=np.float64) + 0.5, np.ones((2, 2)))
    assert data.train.dtype == torch.float32 and data.test.shape == (2, 2)
    with pytest.raises(DataError, match=r"test data: examples of shape \(3,\)"):
        loaded_from_array(np.zeros((4, 2)) + 0.5, np.ones((2, 3)))
