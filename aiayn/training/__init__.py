"""Training: loss, schedule, checkpoints, the trainer and data parallelism. Never imports decoding."""
