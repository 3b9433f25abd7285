"""Energy networks: ``nn.Module`` s mapping ``(B, *shape)`` to ``(B,)``, lower = more probable."""

from shortrun.energies.mlp import MLPEnergy

__all__ = ["MLPEnergy"]
