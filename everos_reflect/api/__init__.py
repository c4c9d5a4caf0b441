"""The HTTP admin API (SPEC §7)."""

from everos_reflect.api.app import create_app

__all__ = ["create_app"]
