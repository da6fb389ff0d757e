r"""Autoencoders of the GCA paper (spec §3), as ``torch.nn.Module`` factories.

* :func:`tabular_ae`: encoder ``Linear(d_x,256)-ReLU-Linear(256,64)-ReLU-Linear(64,16)``, mirrored
  decoder with a linear head; parameter count :math:`P = 513 d_x + 35\,472` (spec §3.1).
* :func:`conv_ae`: three-layer conv encoder (c_in→128→128→latent_ch, 3×3 kernels, strides
  2, 2, 1, padding 1, no BatchNorm) and the mirrored transposed-conv decoder; an ``h×w`` image
  (h, w divisible by 4) gives a ``latent_ch × h/4 × w/4`` latent. For ``latent_ch = 16``:
  CIFAR-10 (3×32×32) P = 339,219 and Fashion-MNIST (1×28×28) P = 334,609 (spec §3.2);
  digits (1×8×8) gives D_z = 64.

Both modules take and return *flat* rows ``(B, d_x)`` so every caller (training, scoring,
attack) sees vectors; the conv AE reshapes internally to ``(B, c, h, w)``. ``encode`` returns
flat latent codes ``(B, D_z)``.

Initialisation (:func:`init_parameters`) draws from an explicit ``numpy.random.Generator``, never
from torch's global generator: the modules are built on the ``meta`` device (no draw at all) and
every weight and bias of a ``Linear``/``Conv2d``/``ConvTranspose2d`` layer is then drawn from
:math:`U(-b, b)` with :math:`b = 1/\sqrt{\text{fan\_in}}`, the distribution of torch's default
``reset_parameters`` (``kaiming_uniform_(a=√5)`` gives :math:`\text{gain}\sqrt{3/\text{fan\_in}}
= \sqrt{2/6}\sqrt{3/\text{fan\_in}} = 1/\sqrt{\text{fan\_in}}`), with torch's
:math:`\text{fan\_in} = W\text{.shape}[1]\cdot\prod W\text{.shape}[2:]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from veilbench.validation import ValidationError

LATENT_DIM_TABULAR = 16


def _torch():
    import torch

    return torch


def _on_meta(build):
    """Construct ``build()`` on the meta device (no RNG draw), then allocate uninitialised CPU memory."""
    torch = _torch()
    with torch.device("meta"):
        model = build()
    return model.to_empty(device="cpu")


def init_parameters(model, rng: np.random.Generator):
    """Draw every weight and bias of ``model``'s Linear/Conv/ConvTranspose layers from ``rng`` as
    :math:`U(-1/\\sqrt{\\text{fan\\_in}},\\ 1/\\sqrt{\\text{fan\\_in}})` (module doc), in
    ``model.modules()`` order; returns ``model``."""
    if not isinstance(rng, np.random.Generator):
        raise ValidationError(f"rng: must be a numpy.random.Generator, got {type(rng).__name__}")
    torch = _torch()
    nn = torch.nn
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
                w = layer.weight
                bound = 1.0 / np.sqrt(w.shape[1] * int(np.prod(w.shape[2:])))
                for p in (w, layer.bias):
                    if p is not None:
                        p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    return model


def _autoencoder(encoder, decoder, attrs: dict, input_shape=None, latent_shape=None):
    """An ``nn.Module`` with ``encoder``/``decoder`` (built by the two factories, encoder first: the
    order in which :func:`init_parameters` draws), ``attrs`` as attributes, and ``encode``,
    ``decode``, ``forward`` on flat ``(B, ·)`` tensors; ``input_shape``/``latent_shape`` are the
    per-record shapes the encoder/decoder take (None: flat)."""
    nn = _torch().nn

    class AutoEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, value in attrs.items():
                setattr(self, name, value)
            self.encoder, self.decoder = encoder(nn), decoder(nn)

        def encode(self, x):
            return self.encoder(x if input_shape is None else x.reshape(-1, *input_shape)).flatten(1)

        def decode(self, z):
            return self.decoder(z if latent_shape is None else z.reshape(-1, *latent_shape)).flatten(1)

        def forward(self, x):
            return self.decode(self.encode(x))

    return AutoEncoder


def tabular_ae(d_x: int, rng: np.random.Generator, latent_dim: int = LATENT_DIM_TABULAR):
    """MLP AE ``d_x → 256 → 64 → latent_dim → 64 → 256 → d_x`` (spec §3.1), initialised from ``rng``;
    returns an ``nn.Module``."""
    if int(d_x) < 1:
        raise ValidationError(f"d_x: must be a positive integer, got {d_x!r}")
    model = _autoencoder(
        lambda nn: nn.Sequential(nn.Linear(d_x, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                                 nn.Linear(64, latent_dim)),
        lambda nn: nn.Sequential(nn.Linear(latent_dim, 64), nn.ReLU(), nn.Linear(64, 256), nn.ReLU(),
                                 nn.Linear(256, d_x)),
        {"input_dim": int(d_x), "latent_dim": int(latent_dim)},
    )
    return init_parameters(_on_meta(model), rng)


def conv_ae(
    image_shape: tuple[int, int, int],
    rng: np.random.Generator,
    latent_channels: int = 16,
    output_activation: Literal["tanh", "none"] = "tanh",
):
    """Conv AE for ``image_shape = (c, h, w)`` images (spec §3.2), initialised from ``rng``; inputs
    and outputs are flat ``(B, c·h·w)``."""
    c, h, w = (int(v) for v in image_shape)
    if min(c, h, w) < 1 or h % 4 or w % 4:
        raise ValidationError(f"image_shape: need positive (c, h, w) with h, w divisible by 4, got {image_shape!r}")
    if output_activation not in ("tanh", "none"):
        raise ValidationError(f"output_activation: must be 'tanh' or 'none', got {output_activation!r}")
    latent_shape = (latent_channels, h // 4, w // 4)

    def decoder(nn):
        head = [nn.Tanh()] if output_activation == "tanh" else []
        return nn.Sequential(
            nn.ConvTranspose2d(latent_channels, 128, 3, stride=1, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(128, 128, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(128, c, 3, stride=2, padding=1, output_padding=1), *head,
        )

    model = _autoencoder(
        lambda nn: nn.Sequential(
            nn.Conv2d(c, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(128, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(128, latent_channels, 3, stride=1, padding=1),
        ),
        decoder,
        {"image_shape": (c, h, w), "input_dim": c * h * w, "latent_shape": latent_shape,
         "latent_dim": int(np.prod(latent_shape))},
        input_shape=(c, h, w), latent_shape=latent_shape,
    )
    return init_parameters(_on_meta(model), rng)


def count_params(model) -> int:
    """Number of trainable scalars :math:`P` of a module."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def tabular_param_count(d_x: int) -> int:
    """Closed form :math:`P = 513 d_x + 35\\,472` of the tabular AE (spec §3.1)."""
    return 513 * int(d_x) + 35_472


@dataclass(frozen=True)
class AESpec:
    """Everything needed to rebuild an AE (the attack rebuilds the victim's from a flat vector).

    ``kind="mlp"``: :func:`tabular_ae` on ``input_dim`` features; ``kind="conv"``: :func:`conv_ae`
    on ``image_shape`` (whose product must equal ``input_dim``).
    """

    kind: Literal["mlp", "conv"]
    input_dim: int
    image_shape: tuple[int, int, int] | None = None
    latent_channels: int = 16
    output_activation: Literal["tanh", "none"] = "none"

    def __post_init__(self) -> None:
        if self.kind == "conv":
            if self.image_shape is None or int(np.prod(self.image_shape)) != self.input_dim:
                raise ValidationError(
                    f"image_shape: conv AE needs (c, h, w) with c·h·w = {self.input_dim} features, "
                    f"got {self.image_shape!r}"
                )
        elif self.kind != "mlp":
            raise ValidationError(f"kind: must be 'mlp' or 'conv', got {self.kind!r}")

    @property
    def latent_dim(self) -> int:
        """:math:`D_z`: 16 (MLP) or ``latent_channels · h/4 · w/4`` (conv)."""
        if self.kind == "mlp":
            return LATENT_DIM_TABULAR
        _, h, w = self.image_shape
        return int(self.latent_channels * (h // 4) * (w // 4))

    def build(self, rng: np.random.Generator):
        """A fresh module with parameters drawn from ``rng`` (:func:`init_parameters`)."""
        if self.kind == "mlp":
            return tabular_ae(self.input_dim, rng)
        return conv_ae(self.image_shape, rng, self.latent_channels, self.output_activation)
