"""The client-vectorised engine follows the sequential simulator's trajectory."""

import numpy as np
import pytest

from veilbench.gca.simulator import FedConfig, run_protocol
from veilbench.gca.vectorized import run_parameter_sharing_vectorized
from veilbench.validation import ValidationError

from .helpers import tiny_federation


@pytest.mark.parametrize("method", ["fedavg", "fednova", "fedprox"])
def test_matches_sequential_on_unequal_shards(method):
    fed = tiny_federation((13, 30, 41))  # 2, 3 and 5 mini-batches per epoch: masking is exercised
    cfg = FedConfig(rounds=2, local_epochs=2, batch_size=10, prox_mu=0.1)
    seq = run_protocol(method, fed, cfg, 4)
    vec = run_parameter_sharing_vectorized(method, fed, cfg, 4)
    assert np.array_equal(seq.local_steps, vec.local_steps)
    assert np.allclose(seq.victim_params, vec.victim_params, atol=1e-4)
    assert np.allclose(seq.auc, vec.auc, atol=1e-3)


def test_rejects_conv_models():
    from veilbench.gca.models import AESpec
    from veilbench.gca.simulator import Federation

    fed = Federation([np.zeros((4, 64))], np.zeros((2, 64)), np.array([0, 1]), AESpec("conv", 64, (1, 8, 8)))
    with pytest.raises(ValidationError, match="spec.kind"):
        run_parameter_sharing_vectorized("fedavg", fed, FedConfig(rounds=1), 0)


def test_rejects_a_schedule_that_would_fire():
    fed = tiny_federation()
    with pytest.raises(ValidationError, match="lr_step_size"):
        run_parameter_sharing_vectorized("fedavg", fed, FedConfig(rounds=1, local_epochs=3, lr_step_size=2), 0)
