"""The cascade's derived copies: SQLite metadata, LanceDB vectors and full text, the watcher.

Importing this package defers the ``__init__`` of LanceDB's REST namespace client (see
:mod:`everos_reflect.index.deferred`) before anything here imports LanceDB.
"""

from everos_reflect.index.deferred import defer_package_init

defer_package_init()
