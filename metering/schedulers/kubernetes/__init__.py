"""Kubernetes as the floor reads it: its API's Kueue Workloads or pods, listed every minute by
a read-only service account (lister), each object read as a wait (objects); metering keeps
their timelines itself, since the API forgets an object once it is gone."""
