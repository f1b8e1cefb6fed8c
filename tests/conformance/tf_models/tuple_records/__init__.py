"""TensorFlowTrial as seed 003 shows it: records are (features, labels) tuples, training metrics and
a session config given, data fetched by download_data and found through pedl.get_download_data_dir()."""

from .model import TupleRecordTrial, download_data, make_data_loaders

__all__ = ["TupleRecordTrial", "download_data", "make_data_loaders"]
