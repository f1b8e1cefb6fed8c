import numpy as np
import pytest
import torch

from pedl.pytorch._data import BatchError, batch_length, split_batch, to_device

CPU = torch.device("cpu")


def test_every_seed_form_becomes_tensors_in_the_same_nesting() -> None:
    batch = {
        "input1": [{"sub_input1": np.array([[0, 0], [0, 0]])}, {"sub_input2": torch.tensor([0, 0])}],
        "input2": (torch.tensor([0, 0]), np.zeros((2, 2), dtype=np.float32)),
    }
    out = to_device(batch, CPU)
    assert isinstance(out["input1"], list) and isinstance(out["input2"], tuple)
    assert torch.equal(out["input1"][0]["sub_input1"], torch.zeros(2, 2, dtype=torch.int64))
    assert out["input2"][1].dtype == torch.float32
    assert to_device(np.array([1.5]), CPU).tolist() == [1.5]
    assert to_device([torch.ones(1), np.ones(1)], CPU)[1].tolist() == [1.0]


def test_unconvertible_part_is_named_by_type_and_position() -> None:
    with pytest.raises(BatchError, match=r"batch\['input1'\]\[1\]\['x'\]: builtins.str cannot be converted"):
        to_device({"input1": [np.ones(1), {"x": "text"}]}, CPU)
    with pytest.raises(BatchError, match=r"batch\[0\]: dict keys must be strings, found key 3"):
        to_device(({3: np.ones(1)}, np.ones(1)), CPU)
    with pytest.raises(BatchError, match=r"batch\[1\]: np.ndarray of dtype object"):
        to_device((np.ones(1), np.array([object()])), CPU)


def test_batches_must_be_pairs() -> None:
    assert split_batch((1, 2)) == (1, 2)
    with pytest.raises(BatchError, match=r"batch must be a pair \(input, target\), got a tuple of 3 items"):
        split_batch((1, 2, 3))


def test_batch_length_is_first_dimension_of_first_tensor() -> None:
    assert batch_length({"a": [torch.zeros(7, 2)], "b": torch.zeros(3)}) == 7
