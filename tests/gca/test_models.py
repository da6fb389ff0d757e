"""Parameter counts of the paper's autoencoders (spec §3) and AESpec validation."""

import numpy as np
import pytest

from veilbench.gca.models import AESpec, conv_ae, count_params, tabular_ae, tabular_param_count
from veilbench.validation import ValidationError

PAPER_COUNTS = {22: 46_758, 14: 42_654, 15: 43_167, 29: 50_349, 5: 38_037}


@pytest.mark.parametrize("d_x,expected", sorted(PAPER_COUNTS.items()))
def test_tabular_counts_match_table_11(d_x, expected):
    assert count_params(tabular_ae(d_x, np.random.default_rng(0))) == expected == tabular_param_count(d_x)


@pytest.mark.parametrize(
    "shape,count,latent", [((3, 32, 32), 339_219, 1024), ((1, 28, 28), 334_609, 784), ((1, 8, 8), None, 64)]
)
def test_conv_counts_and_latent(shape, count, latent):
    import torch

    model = conv_ae(shape, np.random.default_rng(0))
    if count is not None:
        assert count_params(model) == count
    x = torch.zeros(2, shape[0] * shape[1] * shape[2])
    assert model.encode(x).shape == (2, latent)
    assert model(x).shape == x.shape


def test_conv_latent_channels_reduce_code_size():
    assert conv_ae((1, 8, 8), np.random.default_rng(0), latent_channels=4).latent_dim == 16


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(kind="conv", input_dim=64, image_shape=None), "image_shape"),
        (dict(kind="conv", input_dim=63, image_shape=(1, 8, 8)), "image_shape"),
        (dict(kind="rnn", input_dim=4), "kind"),
    ],
)
def test_aespec_rejects_bad_input(kwargs, field):
    with pytest.raises(ValidationError, match=field):
        AESpec(**kwargs)


def test_conv_rejects_sizes_not_divisible_by_four():
    with pytest.raises(ValidationError, match="image_shape"):
        conv_ae((1, 10, 10), np.random.default_rng(0))

