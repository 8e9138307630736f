"""Slurm: its accounting read by `sacct` (sacct: the one reader of its formats, pure, which
the advice's history reader uses too; accounting: the second meter beside the agents', and
the Slurm scheduler metering.schedulers finds for a cluster of kind slurm). The agent's own
Slurm source lives with the agent."""
