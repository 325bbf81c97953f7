"""A copy's lineage for Airflow's OpenLineage provider: the operators' ``get_openlineage_facets_on_complete``.

The core says what a copy read and wrote (:mod:`mirrorflow.lineage`); this module
turns it into the provider's ``OperatorLineage``: one input dataset per source
topic, one output dataset per target topic. Each dataset carries a ``symlinks``
facet naming the mirrorflow cluster; each output the standard
``outputStatistics`` (records and bytes that arrived in this run) and
``mirrorflow_copy``: which links wrote it and from which source datasets, so a
level run with many links keeps the link-by-link picture. docs/lineage.md.

The provider only calls this when OpenLineage is configured (a transport); the
imports wait until then.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar

import attr

from mirrorflow.lineage import DatasetRef, Lineage

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

#: The ``_schemaURL`` of the ``mirrorflow_copy`` facet: docs/lineage.md describes its fields.
COPY_FACET_SCHEMA = "urn:mirrorflow:openlineage:MirrorflowCopyOutputDatasetFacet:1"


@functools.cache
def _copy_facet_class() -> type:
    from openlineage.client.generated.base import OutputDatasetFacet

    @attr.define
    class MirrorflowCopyOutputDatasetFacet(OutputDatasetFacet):
        """The links that wrote this dataset in the run, and the source datasets they read."""

        links: list[str] = attr.field(factory=list)
        sources: list[dict[str, str]] = attr.field(factory=list)
        _additional_skip_redact: ClassVar[list[str]] = ["links", "sources"]

        @staticmethod
        def _get_schema() -> str:
            return COPY_FACET_SCHEMA

    return MirrorflowCopyOutputDatasetFacet


def _symlinks(ref: DatasetRef) -> Any:
    from airflow.providers.common.compat.openlineage.facet import Identifier, SymlinksDatasetFacet

    return SymlinksDatasetFacet(identifiers=[Identifier(namespace="mirrorflow", name=f"{ref.cluster}/{ref.name}",
                                                        type="TOPIC")])


def operator_lineage(lineage: Lineage) -> OperatorLineage:
    """The provider's ``OperatorLineage`` for one copy's :class:`~mirrorflow.lineage.Lineage`."""
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    copy_facet = _copy_facet_class()
    inputs = [InputDataset(namespace=r.namespace, name=r.name, facets={"symlinks": _symlinks(r)})
              for r in lineage.inputs]
    outputs = [OutputDataset(
        namespace=o.namespace, name=o.name, facets={"symlinks": _symlinks(o)},
        outputFacets={"outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=o.records, size=o.bytes),
                      "mirrorflow_copy": copy_facet(links=list(o.links), sources=[
                          {"namespace": s.namespace, "name": s.name, "cluster": s.cluster} for s in o.sources])})
        for o in lineage.outputs]
    return OperatorLineage(inputs=inputs, outputs=outputs)
