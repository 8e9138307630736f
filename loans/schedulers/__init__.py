"""What gpuloans enforces on each scheduler, one folder a scheduler (slurm/, kubernetes/)."""
