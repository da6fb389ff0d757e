"""Every GCA test runs single-threaded with deterministic torch algorithms."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _single_thread_deterministic():
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)
