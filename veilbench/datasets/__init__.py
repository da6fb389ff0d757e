"""Dataset registry (built-in, generated, user files, public loaders) and party partitioning."""

from veilbench.datasets.partition import PreparedData, partition_parties, prepare_dataset
from veilbench.datasets.registry import DATASETS, Dataset, describe_datasets, load_dataset

__all__ = [
    "DATASETS",
    "Dataset",
    "PreparedData",
    "describe_datasets",
    "load_dataset",
    "partition_parties",
    "prepare_dataset",
]
