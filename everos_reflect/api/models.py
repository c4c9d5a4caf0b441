"""Request models shared by every edge that takes memory requests (HTTP API, MCP server).

One pydantic model per operation, so an input the HTTP API refuses is refused by MCP too, with
the same message: a misspelt field is an error (``extra="forbid"``), sizes are bounded here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored


class SearchRequest(Strict):
    query: str = Field(min_length=1)
    top_k: int = Field(5, ge=1, le=100)
    user_id: str | None = None
    app_id: str | None = None
    project_id: str | None = None
    mode: str | None = Field(None, description="hybrid | vector | keyword (default: settings).")
    include_deprecated: bool = False


class EpisodeRequest(Strict):
    user_id: str
    app_id: str | None = None
    project_id: str | None = None
    subject: str = Field(min_length=1)
    content: str = Field(min_length=1)
    timestamp: str | None = Field(None, description="ISO 8601; default now (UTC).")
    session_id: str | None = None
    importance: int | None = Field(None, ge=1, le=10)
