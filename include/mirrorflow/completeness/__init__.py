"""The completeness audit: every cluster holds every message of every origin exactly once, proven by counting.

docs/audit.md tells how; :func:`mirrorflow.completeness.run.run_audit` is the entry point.
"""
