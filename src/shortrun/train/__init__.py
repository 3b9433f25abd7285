"""The one training loop and what it needs: config, checkpoints, logging, run directories."""
