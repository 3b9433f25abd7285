"""Datasets as in-memory tensors in the model's space, with the map back to the data's scale."""

from shortrun.data.base import DataInfo, DataOptions, LoadedData, resolve_data_dir
from shortrun.data.registry import dataset_options, load_data

__all__ = ["DataInfo", "DataOptions", "LoadedData", "dataset_options", "load_data",
           "resolve_data_dir"]
