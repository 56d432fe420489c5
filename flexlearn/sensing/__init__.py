"""Sensors and their signals: coil fields, raw sensor streams, magnetometer and module calibration, IMU joint
angles and attitude filters (`attitude`)."""
