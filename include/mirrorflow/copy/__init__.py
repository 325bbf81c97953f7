"""The copy engine: what Spark executors run for each unit of work (see docs/exactly-once.md)."""
