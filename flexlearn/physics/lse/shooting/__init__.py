"""Constraint-based baseline of the LSE statics: Cosserat-rod shooting, forward (`forward`) and for the inverse
pose statics (`pose`).
"""
