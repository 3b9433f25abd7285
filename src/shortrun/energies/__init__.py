"""Energy networks: ``nn.Module`` s mapping ``(B, *shape)`` to ``(B,)``, lower = more probable."""

from shortrun.energies.conditional import AtSigma, NoiseConditionalEnergy
from shortrun.energies.conv import ConvEnergy
from shortrun.energies.mlp import MLPEnergy
from shortrun.energies.rbm import BernoulliRBMParams, GaussianRBMParams

__all__ = ["AtSigma", "BernoulliRBMParams", "ConvEnergy", "GaussianRBMParams", "MLPEnergy",
           "NoiseConditionalEnergy"]
