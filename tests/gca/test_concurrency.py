"""GCA stage functions hold no process-global state: concurrent cells reproduce sequential ones.

Three checks, from the cheapest and deterministic to the end-to-end one:

* the stages neither read nor write torch's global generator (its state is unchanged, and
  results do not depend on what it was seeded with before the call);
* two cells (GCA and FedAvg, release → attack) run at the same time in two threads give
  byte-identical arrays to the same cells run one after the other.
"""

import hashlib
import threading

import numpy as np
import pytest

from tests.gca.helpers import digits_stage_inputs
from veilbench.gca import family as F

TINY = dict(rounds=2, local_epochs=2, recon_epochs=2, align_epochs=1, attack_starts=4, attack_max_steps=20,
            surrogate_max_epochs=10, surrogate_patience=3)
CELLS = (F.Params(method="gca", **TINY), F.Params(method="fedavg", **TINY))


@pytest.fixture(scope="module")
def inputs():
    return digits_stage_inputs(240, seed=0)


def _digest(inputs, params, seed: int) -> str:
    """SHA-256 over every array (name, dtype, shape, bytes) of release, integrate and attack."""
    inputs, h = dict(inputs), hashlib.sha256()
    for stage in ("release", "integrate", "attack"):
        out = getattr(F, stage)(inputs, params, seed)
        inputs[stage] = out.arrays
        for name in sorted(out.arrays):
            arr = np.ascontiguousarray(out.arrays[name])
            h.update(f"{stage}/{name}/{arr.dtype}/{arr.shape}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


def test_stages_neither_read_nor_write_torchs_global_generator(inputs):
    import torch

    torch.manual_seed(1)
    before = torch.get_rng_state()
    first = _digest(inputs, CELLS[0], 100)
    assert torch.equal(torch.get_rng_state(), before), "a GCA stage drew from or seeded torch's global generator"
    torch.manual_seed(2)
    assert _digest(inputs, CELLS[0], 100) == first, "GCA results depend on torch's global generator"


def test_two_cells_in_parallel_threads_give_the_bytes_of_sequential_runs(inputs):
    alone = [_digest(inputs, params, 100) for params in CELLS]
    together: list[str | None] = [None, None]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(CELLS))

    def run(i: int) -> None:
        try:
            barrier.wait()
            together[i] = _digest(inputs, CELLS[i], 100)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(CELLS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert together == alone
    assert alone[0] != alone[1]
