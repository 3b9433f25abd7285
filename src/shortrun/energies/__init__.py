"""Energy networks: ``nn.Module`` s mapping ``(B, *shape)`` to ``(B,)``, lower = more probable."""

from shortrun.energies.conditional import AtSigma, NoiseConditionalEnergy
from shortrun.energies.conv import ConvEnergy
from shortrun.energies.mlp import MLPEnergy

__all__ = ["AtSigma", "ConvEnergy", "MLPEnergy", "NoiseConditionalEnergy"]
