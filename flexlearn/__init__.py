"""flexlearn: sensing, modelling and control of flexible and continuum robots in PyTorch."""

__version__ = "0.1.0"
