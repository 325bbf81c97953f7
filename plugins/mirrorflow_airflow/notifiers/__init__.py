"""Notifiers: callbacks that tell a person about a task's outcome (the alert notifier of docs/alerts.md)."""
