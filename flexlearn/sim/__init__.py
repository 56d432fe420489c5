"""Simulators of the hardware (seed 000 arm, seed 002 sweep rig and robot) that produce raw sensor streams."""
