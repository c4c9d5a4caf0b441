"""Recovery outside a run (``serve`` start-up, a CLI write settling a crash) holds the rebuild
lock shared, as a run and ``undo`` do: it rewrites index rows and clusters, which a ``reindex``
or ``recluster`` in another process empties and refills meanwhile."""

from __future__ import annotations

import pytest

from everos_reflect.engine.recovery import recover_all, settle
from everos_reflect.errors import StrategyBusy
from everos_reflect.index import rebuild
from everos_reflect.runtime import Runtime
from tests.test_recovery_hook import Journaled
from tests.test_recovery_hook import journaled as journaled  # the hook tests' fixtures
from tests.test_recovery_hook import rt as rt


def test_start_up_recovery_waits_for_a_rebuild_in_progress(
        rt: Runtime, journaled: Journaled) -> None:
    journaled.pending = 1
    with rebuild.rebuilding(rt.index_dir):  # a reindex in another process, say
        assert journaled.name not in recover_all(rt)  # left for the strategy's next run
        assert journaled.order == []
    assert recover_all(rt)[journaled.name] == {"recovered": 1}


def test_a_rebuild_waits_for_a_recovery_in_progress(rt: Runtime, journaled: Journaled,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def recover(runtime: Runtime) -> dict[str, int]:
        fd = rebuild._try(rebuild.lock_file(runtime.index_dir), rebuild.fcntl.LOCK_EX)
        seen.append(fd is None)  # a rebuild could not start now
        if fd is not None:
            rebuild.release(fd)
        return {"recovered": 1}

    monkeypatch.setattr(journaled, "recover", recover)
    recover_all(rt)
    assert seen == [True]


def test_a_writing_command_is_refused_while_a_rebuild_holds_the_interrupted_work(
        rt: Runtime, journaled: Journaled) -> None:
    journaled.pending = 2
    with rebuild.rebuilding(rt.index_dir):
        with pytest.raises(StrategyBusy, match="rebuilt"):
            settle(rt, wait=0)
        assert journaled.pending == 2
    assert settle(rt, wait=0) == 2
