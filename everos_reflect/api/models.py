"""Request models shared by every edge that takes memory requests (HTTP API, MCP server).

One pydantic model per operation, so an input the HTTP API refuses is refused by MCP too, with
the same message: a misspelt field is an error (``extra="forbid"``), types are strict (``"yes"``
is not a boolean, ``"5"`` not a number), ids carry their pattern (published in the OpenAPI
schema), sizes are bounded here.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from everos_reflect.index.search import MAX_TOP_K
from everos_reflect.model import ENTRY_ID_RE, NAME_PATTERN, EntryId, validate_name


class Strict(BaseModel):
    # extra: a misspelt field is an error, not ignored; strict: {"force": "yes"} is refused
    # rather than read as true (it once ran a real merge).
    model_config = ConfigDict(extra="forbid", strict=True)


def _name(value: str, info: ValidationInfo) -> str:
    return validate_name(value, info.field_name or "id")  # InvalidId says what is allowed


def _entry_id(value: str) -> str:
    EntryId.parse(value)
    return value


# The pattern is published in the schema; the validators give the message a person can act on.
Name = Annotated[str, AfterValidator(_name), Field(
    json_schema_extra={"pattern": NAME_PATTERN}, description="1-128 of A-Z a-z 0-9 _ . -")]
EntryIdText = Annotated[str, AfterValidator(_entry_id), Field(
    json_schema_extra={"pattern": ENTRY_ID_RE.pattern}, description="e.g. ep_20261012_0001")]


class SearchRequest(Strict):
    query: str = Field(min_length=1)
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    user_id: Name | None = None
    app_id: Name | None = None
    project_id: Name | None = None
    mode: str | None = Field(None, description="hybrid | vector | keyword (default: settings).")
    include_deprecated: bool = False


class EpisodeRequest(Strict):
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    subject: str = Field(min_length=1)
    content: str = Field(min_length=1)
    timestamp: str | None = Field(None, description="ISO 8601; default now (UTC).")
    session_id: Name | None = None
    importance: int | None = Field(None, ge=1, le=10)


class TriggerRequest(Strict):
    name: str = Field(min_length=1, max_length=200,
                      description="Strategy name, e.g. reflect_episodes.")
    timeout: float = Field(120.0, ge=0, le=86400, description="Seconds to wait for the run.")
    force: bool = Field(False, description="Run even when the strategy is disabled.")


class UndoRequest(Strict):
    entry_id: EntryIdText
    user_id: Name
    app_id: Name | None = None
    project_id: Name | None = None
    cascade: bool = False


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable, e.g. invalid_request, too_large.")
    message: str = Field(description="What was wrong, naming the field or limit.")


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message"}}``."""

    error: ErrorDetail
