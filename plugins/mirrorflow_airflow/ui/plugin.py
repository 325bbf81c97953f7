"""The Airflow plugin: mounts the status app at ``/mirror`` and adds "Mirror" to the UI's navigation.

The page opens inside the UI (an external view shown in a frame at
``/plugin/mirror``), so it shares the UI's login: the session cookie reaches the
app with every request from the page.

Airflow loads plugins in every process, each task's too, while only the API
server mounts apps: the app (FastAPI and Airflow's security layer, half a
second of imports) is imported when the API server asks for it, not before.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.plugins_manager import AirflowPlugin

#: Where the app is mounted in the API server, and the page's route in the UI.
URL_PREFIX = "/mirror"
UI_ROUTE = "mirror"


class MirrorflowPlugin(AirflowPlugin):
    name = "mirrorflow"
    external_views = [{"name": "Mirror", "href": f"{URL_PREFIX}/", "destination": "nav", "url_route": UI_ROUTE,
                       "category": "mirrorflow"}]

    @property  # read on the instance, by the API server only
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        from mirrorflow_airflow.ui.app import app

        return [{"app": app, "url_prefix": URL_PREFIX, "name": "mirrorflow status"}]
