"""Query and path parameters shared by the API's routers: ids carry their pattern in the
OpenAPI schema and are checked against it (``invalid_id`` with the id rules when they fail)."""

from __future__ import annotations

from fastapi import Path, Query

from everos_reflect.model import ENTRY_ID_RE, NAME_PATTERN

NAME_QUERY = Query(pattern=NAME_PATTERN)
OPTIONAL_NAME_QUERY = Query(None, pattern=NAME_PATTERN)
ENTRY_ID_PATH = Path(pattern=ENTRY_ID_RE.pattern, description="e.g. in_20261012_0001")
RELATION_ID_PATH = Path(pattern=r"^rel_[0-9]{8}_[0-9]{4,18}$", description="e.g. rel_20261012_0001")
