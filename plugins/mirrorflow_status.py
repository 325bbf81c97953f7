"""Airflow loads every file of this folder as a plugin source; this one hands Airflow the plugin once.

An installed mirrorflow (the wheel, or this checkout's editable install) registers
the plugin through Airflow's ``airflow.plugins`` entry point. Airflow loads both
this folder and the entry points, and a plugin met twice is an import error, so
this file offers the class only where no entry point does (a checkout on
``PYTHONPATH`` without installing it). ``.airflowignore`` keeps Airflow from
loading each file of ``mirrorflow_airflow`` a second time as a top-level module.
"""

from importlib.metadata import entry_points

if not any(ep.value.startswith("mirrorflow_airflow.") for ep in entry_points(group="airflow.plugins")):
    from mirrorflow_airflow.ui.plugin import MirrorflowPlugin

    __all__ = ["MirrorflowPlugin"]
