"""The base every topology model shares: unknown keys are errors, loaded config never changes."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError


class Model(BaseModel):
    """Unknown keys are errors (a typo never silently drops a setting); instances are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def check_patterns(patterns: Iterable[str]) -> None:
    """Refuse the first regular expression that does not compile, naming it (inside a field validator)."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PydanticCustomError("pattern", "bad regular expression {pattern!r}: {error}",
                                      {"pattern": pattern, "error": str(exc)}) from None
