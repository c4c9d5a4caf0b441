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

from everos_reflect.model import ENTRY_ID_RE, NAME_PATTERN

NameQuery = Annotated[str, Query(pattern=NAME_PATTERN)]
OptionalNameQuery = Annotated[str | None, Query(pattern=NAME_PATTERN)]
EntryIdPath = Annotated[str, Path(pattern=ENTRY_ID_RE.pattern, description="e.g. in_20261012_0001")]
#: A relation id (``resolve``'s path): ``rel_<YYYYMMDD>_<NNNN>``.
RELATION_ID_PATTERN = r"^rel_[0-9]{8}_[0-9]{4,18}$"
RelationIdPath = Annotated[str, Path(pattern=RELATION_ID_PATTERN,
                                     description="e.g. rel_20261012_0001")]
