"""Lightning tasks: the direction model's training loop, its callbacks and checkpoints."""
