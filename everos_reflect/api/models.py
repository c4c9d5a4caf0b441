"""Request models shared by every edge that takes memory requests (HTTP API, MCP server).

One pydantic model per operation, so an input the HTTP API refuses is refused by MCP too, with
the same message: a misspelt field is an error (``extra="forbid"``), sizes are bounded here.
"""

from __future__ import annotations

from typing import Literal

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
    kinds: list[str] | None = Field(
        None, max_length=7,
        description="Entry kinds to search (episode, atomic_fact, insight, ...); default episode.")
    include_stale: bool = False


class EpisodeRequest(Strict):
    user_id: str
    app_id: str | None = None
    project_id: str | None = None
    subject: str = Field(min_length=1)
    content: str = Field(min_length=1)
    timestamp: str | None = Field(None, description="ISO 8601; default now (UTC).")
    session_id: str | None = None
    importance: int | None = Field(None, ge=1, le=10)


class TaskRecordRequest(Strict):
    """``POST /api/v1/tasks``: a task record (bounds are checked again by ``new_task``)."""

    user_id: str
    app_id: str | None = None
    project_id: str | None = None
    task_type: str = Field(min_length=1, max_length=128, description="e.g. deploy")
    goal: str = Field(min_length=1, max_length=4000)
    steps: list[str] = Field(min_length=1, max_length=100, description="One entry per step.")
    outcome: Literal["success", "failure", "partial"]
    errors: list[str] = Field(default_factory=list, max_length=50)
    outcome_note: str | None = Field(None, max_length=4000,
                                     description="What happened; default: the outcome word.")
    timestamp: str | None = Field(None, description="ISO 8601; default now (UTC).")


class BriefingRequest(Strict):
    """``POST /api/v1/memory/briefing``: one bounded block of memory for a query."""

    user_id: str
    app_id: str | None = None
    project_id: str | None = None
    query: str = Field(min_length=1, max_length=2000)
    task_type: str | None = Field(None, description="Adds the lessons of this task type.")
    max_tokens: int = Field(1000, ge=1, le=32000,
                            description="Budget of the whole block, in the bundled tokenizer's "
                                        "tokens.")


class LessonsQuery(Strict):
    """``GET /api/v1/lessons``: the live lessons of a task type, most confirmed first."""

    task_type: str = Field(min_length=1, max_length=128)
    user_id: str | None = Field(None, description="One user; default: every user.")
    app_id: str | None = None
    project_id: str | None = None


class InsightsQuery(Strict):
    """The query of ``GET /api/v1/memory/insights``."""

    user_id: str
    app_id: str | None = None
    project_id: str | None = None
    include_stale: bool = False


class ExplainQuery(Strict):
    """``GET /api/v1/memory/explain/{entry_id}``: the path's id and the query's user."""

    entry_id: str = Field(min_length=1, max_length=64)
    user_id: str
    app_id: str | None = None
    project_id: str | None = None
