"""The base every topology model shares: unknown keys are errors, loaded config never changes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Unknown keys are errors (a typo never silently drops a setting); instances are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
