"""Partition functions and likelihoods: exact enumeration, grids, AIS."""
