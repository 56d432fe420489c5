"""Direction networks and the identified models of a module (coil, joint, several modules at once)."""
