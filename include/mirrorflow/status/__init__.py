"""What the mirror looks like now, from what the DAGs stored: the status page's document and the metrics.

Pure: :class:`StatusInputs` (filled by the Airflow glue) in, JSON-able data or
Prometheus text out. See docs/status.md.
"""

from mirrorflow.status.build import build_status, links_page
from mirrorflow.status.inputs import DagInfo, RunInfo, RunningTask, StatusInputs

__all__ = ["DagInfo", "RunInfo", "RunningTask", "StatusInputs", "build_status", "links_page"]
