"""Schema registry sync: one primary, subject names translated per cluster, ids and versions kept."""
