"""The ``everos-reflect`` command line (:mod:`everos_reflect.cli.main`).

Importing this package sets the command process's memory policy before any command module
imports pyarrow (through LanceDB): Arrow allocates from the system heap, not an allocator of its
own (:func:`everos_reflect.embedding.heap.prefer_system_arrow_pool`).
"""

from everos_reflect.embedding.heap import prefer_system_arrow_pool

prefer_system_arrow_pool()
