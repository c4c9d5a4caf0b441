"""Query and path parameters shared by the API's routers: ids carry their pattern in the
OpenAPI schema and are checked against it (``invalid_id`` with the id rules when they fail).

Each is an ``Annotated`` type, never a shared ``Query(...)`` default: FastAPI writes a
parameter's name into the ``Query`` object given as its default (its alias), so one object
shared by ``app_id`` and ``project_id`` read both from ``?app_id=`` (``app_id=acme`` opened
``acme/acme``) and refused ``project_id``. An annotation's object is copied per parameter.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from everos_reflect.api.models import whole_query
from everos_reflect.model import (
    ENTRY_ID_RE,
    MAX_LIST_LIMIT,
    NAME_PATTERN,
    must_not_be_empty,
    quoted,
)

NameQuery = Annotated[str, Query(pattern=NAME_PATTERN)]
OptionalNameQuery = Annotated[str | None, Query(pattern=NAME_PATTERN)]
EntryIdPath = Annotated[str, Path(pattern=ENTRY_ID_RE.pattern, description="e.g. in_20261012_0001")]
#: A relation id (``resolve``'s path): ``rel_<YYYYMMDD>_<NNNN>``.
RELATION_ID_PATTERN = r"^rel_[0-9]{8}_[0-9]{4,18}$"
RelationIdPath = Annotated[str, Path(pattern=RELATION_ID_PATTERN,
                                     description="e.g. rel_20261012_0001")]


#: ``?limit=`` of the lists of runs, reports and insights, written plainly; ``--limit`` of
#: ``runs`` and ``reports`` has the same bounds.
LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT),
                       BeforeValidator(whole_query(1, MAX_LIST_LIMIT))]


def _plain_bool(value: object) -> object:
    # pydantic reads a query's "yes", "on", "1", "t" or "y" as true and "no", "off", "0" as
    # false: only what the schema's boolean says (JSON's words, any case: Python clients
    # write True as "True") is one here
    if isinstance(value, str):
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not value:  # "?include_stale=": "got ''" read as a misspelt word
            raise PydanticCustomError("bool_parsing", must_not_be_empty("true or false"))
        raise PydanticCustomError("bool_parsing", f"must be true or false, got {quoted(value)}")
    return value


#: A query-string boolean (``?include_stale=true``), ``true`` or ``false`` only.
BoolQuery = Annotated[bool, Query(), BeforeValidator(_plain_bool)]
