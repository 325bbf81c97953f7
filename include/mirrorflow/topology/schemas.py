"""Schema registry sync (topology key ``schemas``): the primary, and each cluster's registry and naming.

All optional. Without the key ``mirror_schemas`` has nothing to do and says so.
With it, registrations made on the primary's registry are copied to every
other cluster's registry, subjects translated, ids and versions kept::

    schemas:
      primary: c1
      schedule: 1m
      clusters:
        c1:
          subject_format: "{tenant}-{instance}-{environment}-{topic}"
          values: {tenant: acme, instance: main, environment: prod}
        c2:
          subject_format: "{tenant}-{environment}-{topic}"
          values: {tenant: acme, environment: prod}
        c3:
          via: rest                      # the registry's REST API instead of its storage topic
          conn_id: c3_registry           # Airflow connection: host = registry URL, login/password = basic auth
        c4:
          subject_format: "{topic}"

A cluster not listed uses its storage topic ``_schemas`` and the subject
format ``{topic}`` (subjects unchanged). ``via: topic`` reads and writes the
registry's storage topic on the cluster itself (``topic`` names it when the
registry's ``kafkastore.topic`` is not ``_schemas``); ``via: rest`` talks to the
registry's Confluent-compatible API at ``url`` or through the Airflow
connection ``conn_id`` (credentials live there, never in this file).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from mirrorflow.naming import NameFormat, format_problems
from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

DEFAULT_SCHEMAS_SCHEDULE = "1m"
DEFAULT_SUBJECT_FORMAT = "{topic}"
DEFAULT_STORAGE_TOPIC = "_schemas"


class RegistryConfig(Model):
    """One cluster's registry: how to reach it and how it names subjects."""

    via: Literal["topic", "rest"] = "topic"
    topic: StrictStr = DEFAULT_STORAGE_TOPIC
    url: StrictStr | None = None
    conn_id: StrictStr | None = None
    subject_format: StrictStr = DEFAULT_SUBJECT_FORMAT
    values: dict[StrictStr, StrictStr] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise PydanticCustomError("url", "url must start with http:// or https://, got {value!r}",
                                      {"value": value})
        if value is not None and "@" in value.split("//", 1)[1].split("/", 1)[0]:
            raise PydanticCustomError("secret_in_file",
                                      "credentials never go in the topology file: use conn_id for basic auth", {})
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RegistryConfig:
        problems = format_problems(self.subject_format, self.values)
        if problems:
            raise PydanticCustomError("subject_format", "subject_format: {problems}",
                                      {"problems": "; ".join(problems)})
        if self.via == "rest" and (self.url is None) == (self.conn_id is None):
            raise PydanticCustomError("registry_endpoint", "via: rest needs exactly one of url or conn_id", {})
        if self.via == "topic" and (self.url is not None or self.conn_id is not None):
            raise PydanticCustomError("registry_endpoint",
                                      "url and conn_id are for via: rest; via: topic uses the cluster itself", {})
        return self

    def subject_naming(self) -> NameFormat:
        return NameFormat.of(self.subject_format, self.values)


class SchemasConfig(Model):
    primary: StrictStr | None = None
    schedule: StrictStr = DEFAULT_SCHEMAS_SCHEDULE
    clusters: dict[StrictStr, RegistryConfig] = Field(default_factory=dict)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value

    @property
    def enabled(self) -> bool:
        return self.primary is not None

    def registry(self, cluster: str) -> RegistryConfig:
        """The cluster's registry settings (defaults when it is not listed)."""
        return self.clusters.get(cluster) or RegistryConfig()
