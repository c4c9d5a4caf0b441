"""``MarkdownStore.user_gone``: the one test of "this user's folder is gone" that the index,
the audit, merge recovery and undo ask (each wrote its own ``not user_dir(ref).is_dir()``)."""

from __future__ import annotations

import os

from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

ANDREW, BOB = UserRef.of("u_andrew"), UserRef.of("u_bob")


def test_a_user_is_gone_once_the_folder_is_renamed_replaced_or_a_loop(rt: Runtime) -> None:
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": "2026-10-01T10:00:00+00:00"},
                    {"Subject": "s", "Content": "c"})
    assert not rt.store.user_gone(ANDREW)
    assert rt.store.user_gone(BOB)  # never had a folder

    folder = rt.store.user_dir(ANDREW)
    folder.rename(rt.store.user_dir(BOB))
    assert rt.store.user_gone(ANDREW) and not rt.store.user_gone(BOB)

    folder.write_text("not a folder", "utf-8")  # a file where the folder goes
    assert rt.store.user_gone(ANDREW)
    folder.unlink()
    os.symlink(folder.name, folder)  # a link to itself: gone, not an OSError
    assert rt.store.user_gone(ANDREW)
