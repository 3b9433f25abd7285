"""Offline evaluation: Fréchet distance, KID, feature extractors, anomaly AUPRC/AUROC.

Every metric is computed in-library from features the user can rebuild offline (classifiers
trained by ``shortrun train classifier_mnist`` / ``classifier_fashion``, or the FID Inception
network loaded from a local weights file). Nothing is downloaded. See docs/evaluation.md.
"""
