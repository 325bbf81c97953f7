"""Onboarding a cluster: preflight and plan, the backfill job, the archive restore, verification."""
