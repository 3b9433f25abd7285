"""Networks of the diffusion amortizer ``q_φ(z | x)`` (Yu et al., "Learning Energy-Based Prior
Model with Diffusion-Amortized MCMC", NeurIPS 2023, §3.2-3.3), sized like the authors' code:

- :class:`NoiseNet`, ``ε_φ(z_λ, λ, c)``: Fourier features of ``z`` (a learned ``nz × nz/2``
  frequency matrix, sines, cosines and ``z`` itself), then a U-shaped stack of gated linear layers
  of widths ``w, 2w, 2w | 2w | 2w, w, nz`` (``w = 128`` in the paper's code, "nf = 4") with
  skip concatenations, each layer ``L(h) ⊙ sigmoid(G(c)) + B(c) + S(h)`` where ``c`` is the
  context: a sinusoidal embedding of the noise level (128) concatenated with the condition
  embedding (1024). The prediction is residual: ``ε̂ = z_λ + out``.
- Condition encoders ``x → c``: for images the authors' encoder (3×3 convolution, then 4×4
  stride-2 convolutions doubling the width up to ``8·nif``, InstanceNorm and LeakyReLU(0.2),
  a last valid convolution down to 1×1); for vectors an MLP; for token ids (the text model, not
  in the paper) a mean of word embeddings and an MLP.
- :class:`LatentDiffusionAmortizer`: encoder + noise net + a learned "no condition" embedding,
  so the one network samples ``q_φ(z | x)`` and, with the condition dropped (probability
  ``damc_mask_prob`` in training, as in classifier-free guidance), the marginal ``q_φ(z)``.
  The authors' code feeds the unconditional branch an MLP of fresh noise; a learned null
  embedding is the standard classifier-free form and needs no extra randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.samplers.diffusion import ancestral_sample, denoising_loss


class SinusoidalEmbedding(nn.Module):
    """Transformer-style sin/cos features of a scalar in [0, 1] (scaled by 1000)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        half = dim // 2
        self.register_buffer("freqs", torch.exp(-math.log(10000) * torch.arange(half) /
                                                max(half - 1, 1)), persistent=False)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        a = 1000.0 * t[:, None] * self.freqs[None]
        return torch.cat([a.sin(), a.cos()], dim=1)


class GatedLayer(nn.Module):
    """``L(h) ⊙ sigmoid(G(c)) + B(c) + S(h)`` with ``c = SiLU(W SiLU(context))``."""

    def __init__(self, d_in: int, d_out: int, d_ctx: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.context = nn.Sequential(nn.SiLU(), nn.Linear(d_ctx, d_out), nn.SiLU())
        self.bias = nn.Linear(d_out, d_out, bias=False)
        self.gate = nn.Linear(d_out, d_out)
        self.skip = nn.Linear(d_in, d_out)

    def forward(self, h: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        c = self.context(context)
        return self.linear(h) * torch.sigmoid(self.gate(c)) + self.bias(c) + self.skip(h)

    def context_shares(self, a: torch.Tensor, first: int, last: int,
                       with_bias: bool) -> torch.Tensor:
        """``W[:, first:last] a (+ b)``: the share of the context projection that the context
        columns ``first:last`` (already through the SiLU) contribute."""
        proj = self.context[1]
        return F.linear(a, proj.weight[:, first:last], proj.bias if with_bias else None)

    def forward_shares(self, h: torch.Tensor, time_share: torch.Tensor,
                       cond_share: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` with the context projection given as its time and condition shares
        (SiLU is element-wise, so ``W SiLU([t; c]) + b = W_t SiLU(t) + (W_c SiLU(c) + b)``).
        Either share may have one row for all of ``h``'s rows: then so do the gate and bias."""
        c = F.silu(time_share + cond_share)
        return self.linear(h) * torch.sigmoid(self.gate(c)) + self.bias(c) + self.skip(h)


class NoiseNet(nn.Module):
    """``ε_φ(z_λ, λ, c)``: ``(B, nz)``, ``(B,)``, ``(B, cond_dim)`` → ``(B, nz)``."""

    def __init__(self, nz: int, cond_dim: int, width: int = 128, time_dim: int = 128) -> None:
        super().__init__()
        self.nz = nz
        self.freq = nn.Parameter(torch.randn(nz, max(nz // 2, 1)))
        d_in = 2 * self.freq.shape[1] + nz
        self.time = nn.Sequential(SinusoidalEmbedding(time_dim), nn.Linear(time_dim, time_dim),
                                  nn.SiLU(), nn.Linear(time_dim, time_dim))
        ctx = time_dim + cond_dim
        w = width
        self.down = nn.ModuleList([GatedLayer(d_in, w, ctx), GatedLayer(w, 2 * w, ctx),
                                   GatedLayer(2 * w, 2 * w, ctx)])
        self.mid = GatedLayer(2 * w, 2 * w, ctx)
        self.up = nn.ModuleList([GatedLayer(4 * w, 2 * w, ctx), GatedLayer(4 * w, w, ctx),
                                 GatedLayer(2 * w, nz, ctx)])
        self.act = nn.LeakyReLU(0.01)

    def forward(self, z: torch.Tensor, logsnr: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        context = torch.cat([self.time(self._level(logsnr)), cond], dim=1)
        return self._unet(z, lambda i, layer, h: layer(h, context))

    def conditioned(self, cond: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor],
                                                          torch.Tensor]:
        """``ε_φ(·, ·, cond)`` for a condition held fixed over many calls, as the sampler holds
        it over its 100 steps: the condition's share of every context projection (at the paper's
        sizes 1024 of the 1152 context columns, most of the network's arithmetic) is computed
        once here, and a
        noise level shared by all rows (every sampler step) is embedded once. ``cond`` may be
        one row for all (the null condition): then the context, gate and bias are one row.
        Equal to :meth:`forward` up to float rounding (the projection's sum is split in two)."""
        t_dim = self.time[-1].out_features
        shares = [layer.context_shares(F.silu(cond), t_dim, t_dim + cond.shape[1], True)
                  for layer in self._gated()]

        def eps(z: torch.Tensor, logsnr: torch.Tensor) -> torch.Tensor:
            level = self._level(logsnr)
            if level.numel() > 1 and bool((level == level[0]).all()):
                level = level[:1]
            t = F.silu(self.time(level))
            return self._unet(z, lambda i, layer, h: layer.forward_shares(
                h, layer.context_shares(t, 0, t_dim, False), shares[i]))

        return eps

    @staticmethod
    def _level(logsnr: torch.Tensor) -> torch.Tensor:
        # the noise level enters as arctan(e^{−λ/2})/(π/2) ∈ (0, 1): t itself for this schedule
        return torch.arctan(torch.exp(-0.5 * logsnr.clamp(-20.0, 20.0))) / (0.5 * math.pi)

    def _gated(self) -> list[GatedLayer]:
        """The gated layers in the order :meth:`_unet` applies them."""
        return [*self.down, self.mid, *self.up]

    def _unet(self, z: torch.Tensor, apply: Callable[[int, GatedLayer, torch.Tensor],
                                                     torch.Tensor]) -> torch.Tensor:
        """The U-shaped stack on the Fourier features of ``z``; ``apply(i, layer, h)`` runs the
        ``i``-th gated layer (of :meth:`_gated`) with its context."""
        proj = 2 * math.pi * z @ self.freq
        h = torch.cat([proj.sin(), proj.cos(), z], dim=1)
        skips = []
        for i, layer in enumerate(self.down):
            h = apply(i, layer, h)
            skips.append(h)
            h = self.act(h)
        i = len(self.down)
        h = apply(i, self.mid, h)
        for j, layer in enumerate(self.up, start=i + 1):
            h = apply(j, layer, self.act(torch.cat([h, skips.pop()], dim=1)))
        return z + h


def image_encoder(shape: tuple[int, ...], emb: int, nif: int) -> nn.Module:
    """The authors' conv encoder for ``(C, H, W)`` images: 28² (MNIST), 32² (SVHN, CIFAR-10)
    and 64² (CelebA) give their three nets; other sizes follow the same rule."""
    c, size = shape[0], shape[1]
    layers: list[nn.Module] = [nn.Conv2d(c, nif, 3, 1, 1), nn.InstanceNorm2d(nif, affine=True),
                               nn.LeakyReLU(0.2)]
    width = nif
    while size > 4:
        out = min(2 * width, 8 * nif)
        layers += [nn.Conv2d(width, out, 4, 2, 1), nn.InstanceNorm2d(out, affine=True),
                   nn.LeakyReLU(0.2)]
        width, size = out, (size + 2 - 4) // 2 + 1
    layers += [nn.Conv2d(width, emb, size, 1, 0), nn.Flatten()]
    return nn.Sequential(*layers)


class TokenEncoder(nn.Module):
    """Token ids ``(B, L)`` → mean word embedding over the non-pad tokens → MLP."""

    def __init__(self, vocab: int, emb: int, width: int, pad_id: int = 0) -> None:
        super().__init__()
        self.words = nn.EmbeddingBag(vocab, width, mode="mean", padding_idx=pad_id)
        self.out = nn.Sequential(nn.LeakyReLU(0.2), nn.Linear(width, emb))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.words(x.long()))


def make_encoder(shape: tuple[int, ...], kind: str, emb: int, nif: int,
                 vocab: int | None = None) -> nn.Module:
    """The condition encoder for data of ``shape`` and ``kind`` (a ``DataInfo``'s)."""
    if kind == "text":
        return TokenEncoder(int(vocab or 0), emb, 8 * nif)
    if len(shape) == 3 and shape[1] == shape[2]:
        return image_encoder(tuple(shape), emb, nif)
    d = math.prod(shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 8 * nif), nn.LeakyReLU(0.2),
                         nn.Linear(8 * nif, emb))


class LatentDiffusionAmortizer(nn.Module):
    """``q_φ(z | x)`` and ``q_φ(z)``: a conditional latent diffusion (module docstring)."""

    def __init__(self, nz: int, encoder: nn.Module, emb: int = 1024, width: int = 128,
                 time_dim: int = 128, n_steps: int = 100, logsnr_min: float = -5.1,
                 logsnr_max: float = 9.8) -> None:
        super().__init__()
        self.nz, self.n_steps = nz, n_steps
        self.logsnr_min, self.logsnr_max = logsnr_min, logsnr_max
        self.encoder = encoder
        self.net = NoiseNet(nz, emb, width, time_dim)
        self.null = nn.Parameter(torch.zeros(1, emb))

    def condition(self, x: torch.Tensor | None, n: int) -> torch.Tensor:
        """The context of ``n`` rows: ``encoder(x)``, or the null embedding when ``x`` is None."""
        return self.null.expand(n, -1) if x is None else self.encoder(x).reshape(n, -1)

    def loss(self, z: torch.Tensor, x: torch.Tensor | None, mask_prob: float = 0.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
        """Per-example denoising loss on targets ``z`` (chain outputs) given ``x``; each row's
        condition is replaced by the null embedding with probability ``mask_prob``."""
        n = z.shape[0]
        if x is None:  # one null row: its context share is computed once, not per row
            return denoising_loss(self.net.conditioned(self.null), z, self.logsnr_min,
                                  self.logsnr_max, generator)
        cond = self.condition(x, len(z))
        if mask_prob > 0:
            drop = torch.rand(n, 1, generator=generator, device=z.device) < mask_prob
            cond = torch.where(drop, self.null.expand(n, -1), cond)
        return denoising_loss(lambda zt, lam: self.net(zt, lam, cond), z, self.logsnr_min,
                              self.logsnr_max, generator)

    @torch.no_grad()
    def sample(self, n: int, x: torch.Tensor | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` draws of ``q_φ(z | x)`` (``x`` of ``n`` rows) or of ``q_φ(z)`` (``x`` None)."""
        # the null condition as one row: the sampler's context is then one row for all
        cond = self.null if x is None else self.condition(x, n)
        return ancestral_sample(self.net.conditioned(cond), n, self.nz,
                                self.n_steps, self.logsnr_min, self.logsnr_max, generator,
                                device=cond.device, dtype=cond.dtype)
