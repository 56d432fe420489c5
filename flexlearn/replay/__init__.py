"""Replay of simulated robot recordings through the runtime: frame streams in the Pi runner's protocols
(`frames`) and the estimator against the seed's baselines (`shapes`).
"""
