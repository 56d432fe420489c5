"""Datasets: raw sweep processing, quality filters, dataset files and the training data module."""
