"""Airflow discovers plugins by loading every file of this folder; this is the one it finds.

The package ``mirrorflow_airflow`` is imported as a package (``.airflowignore``
keeps Airflow from loading each of its files a second time as a top-level module).
"""

from mirrorflow_airflow.ui.plugin import MirrorflowPlugin

__all__ = ["MirrorflowPlugin"]
