"""Jobs: orchestration of training, evaluation and export steps (above `flexlearn.tasks`)."""
