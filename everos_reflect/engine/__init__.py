"""The OME engine: strategies (registry), when they are due (triggers), running them (engine),
scheduling them (scheduler) and the ``serve`` daemon that hosts it all."""

from everos_reflect.engine.engine import Engine, RunOutcome, list_runs, strategies_status
from everos_reflect.engine.registry import (
    RunContext,
    SettingSpec,
    Strategy,
    get_strategy,
    known_strategies,
    register,
    validate_strategy_settings,
)

__all__ = [
    "Engine",
    "RunContext",
    "RunOutcome",
    "SettingSpec",
    "Strategy",
    "get_strategy",
    "known_strategies",
    "list_runs",
    "register",
    "strategies_status",
    "validate_strategy_settings",
]
