"""The S3 archive's location and credentials, from an Airflow AWS connection.

The connection (topology ``archive.conn_id``, default ``mirrorflow_archive``) is
the Amazon provider's ``aws`` type, read with its own hook, so everything it
supports for credentials (keys in login/password or extra, a role to assume, a
profile) works here too. mirrorflow adds two keys to its extra: the bucket
(``bucket``, or the provider's ``service_config.s3.bucket_name``) and the key
prefix (``prefix``; default the topology's ``archive.prefix``; one of several trees
in one Airflow adds ``/<its name>``). The endpoint of
an S3-compatible store is the provider's ``endpoint_url`` (top level or under
``service_config.s3``).

Spark executors cannot reach Airflow's connection store, so the resolved
(possibly temporary) credentials travel in the job's environment, like the
Kafka credentials, never on a command line or in a log.
"""

from __future__ import annotations

from airflow.providers.amazon.aws.hooks.s3 import S3Hook

from mirrorflow.archive import ArchiveLocation
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.masking import mask_values


def archive_location(topology: Topology) -> ArchiveLocation:
    conn_id = topology.archive.conn_id
    hook = S3Hook(aws_conn_id=conn_id)
    try:
        wrapper = hook.conn_config
    except Exception as exc:  # the provider raises AirflowNotFoundException and friends
        raise MirrorflowError(f"archive.conn_id: Airflow connection {conn_id!r} cannot be loaded: {exc}") from None
    extra = dict(wrapper.extra_config or {})
    bucket = extra.get("bucket") or hook.service_config.get("bucket_name")
    if not bucket:
        raise MirrorflowError(f"archive.conn_id: connection {conn_id!r} names no bucket (extra 'bucket' or "
                              "'service_config': {'s3': {'bucket_name': ...}})")
    creds = hook.get_credentials()
    mask_values([creds.secret_key, creds.token])
    prefix = str(extra.get("prefix") or topology.archive.prefix)
    return ArchiveLocation(
        bucket=str(bucket),
        # Several trees in one Airflow: each archives under its own name, so none reads another's.
        prefix=f"{prefix.rstrip('/')}/{topology.namespace}" if topology.namespace else prefix,
        endpoint_url=wrapper.get_service_endpoint_url("s3"),
        region=wrapper.region_name,
        access_key_id=creds.access_key,
        secret_access_key=creds.secret_key,
        session_token=creds.token,
    )
