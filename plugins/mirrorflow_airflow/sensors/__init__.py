"""Sensors: tasks that wait for a condition on the clusters, deferrable by default."""
