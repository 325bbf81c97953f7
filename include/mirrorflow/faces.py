"""Names a package's face hands on but loads only when first asked for.

A face (a package's ``__init__.py``) names everything its room offers, yet some of
its modules are heavy to import (confluent-kafka, pydantic) for callers that need
only the light ones. Such a face lists the heavy names with the module of the
package each comes from, and makes :func:`on_first_use` its module ``__getattr__``
(PEP 562); its ``TYPE_CHECKING`` imports keep them typed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def on_first_use(package: str, names: Mapping[str, str], face: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each of ``names`` imported from its module when first asked
    for, then kept in ``face`` (the face's ``globals()``) so that it is asked for once."""
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        face[name] = value
        return value

    return __getattr__
