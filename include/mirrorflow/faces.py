"""A package's face that hands on names of heavy modules, loaded on first use.

A face (a package's ``__init__.py``: the names it offers, its ``__all__``) may
name what lives in modules that need more than whoever imports the face does
(the topology's models, ``boto3``, ``pyarrow``). It maps each such name to its
module and sets ``__getattr__ = on_first_use(__name__, names)``: the module is
imported when the name is first asked for, and the name is kept on the face.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def on_first_use(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each of ``names`` from its module under ``package``."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
