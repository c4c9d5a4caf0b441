"""One rewrite of the bundled int8 model's graph: look embedding rows up before dequantizing them.

The quantized MiniLM keeps its token (30,522 × 384) and position tables as int8 with one scale
per row and computes ``Gather(Mul(Cast(table_q), scale), ids)``: every call first turns the
whole token table into float32 — two 47 MB temporaries — to read the few hundred rows it needs.
Rewritten as ``Mul(Cast(Gather(table_q, ids)), Gather(scale, ids))`` it dequantizes only those
rows. Each output element is still ``float32(q) * scale`` of the same row and column, so the
vectors are bit-for-bit the same (``tests/test_embedding_graph.py`` checks it against the
original graph).

The rewrite runs when the model loads, in a short-lived child process (:func:`rewritten_in_child`,
~0.5 s idle, most of it importing ``onnx``) so that the ``onnx`` package and its native
library never occupy the long-running process's memory (~20 MB resident if imported there).
Nothing is downloaded: the verified bytes of the shipped file go in through a pipe and the
rewritten graph comes back; :func:`everos_reflect.embedding.local.rewritten_model` keeps it in
a user cache, hash-checked, so later processes skip the child.
Only the exact pattern is rewritten — an int8 initializer, Cast to float32, Mul by a per-row
scale initializer of shape ``(rows, 1)``, Gather on axis 0, intermediates used by nothing else;
anything else is left as it is.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

__all__ = ["gather_before_dequantize", "rewritten_in_child"]


def _axis(node: Any) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 0)


def gather_before_dequantize(model_bytes: bytes) -> tuple[bytes, int]:
    """``model_bytes`` (a serialized ONNX model) with every matching lookup rewritten, and how
    many lookups were rewritten (0: the original bytes are returned unchanged)."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    users: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            users[name] = users.get(name, 0) + 1
    for out in graph.output:  # a graph output counts as a use that must survive
        users[out.name] = users.get(out.name, 0) + 1

    dropped: set[int] = set()  # positions of the Cast and Mul nodes folded into a rewrite
    replaced: dict[int, list[Any]] = {}  # position of a Gather -> the nodes replacing it
    for index, gather in enumerate(nodes):
        if gather.op_type != "Gather" or _axis(gather) != 0:
            continue
        mul_at = producer.get(gather.input[0])
        mul = None if mul_at is None else nodes[mul_at]
        if mul is None or mul.op_type != "Mul" or users.get(mul.output[0]) != 1:
            continue
        cast_out, scale = mul.input
        cast_at = producer.get(cast_out)
        cast = None if cast_at is None else nodes[cast_at]
        if cast is None or cast.op_type != "Cast" or users.get(cast_out) != 1:
            continue
        table = inits.get(cast.input[0])
        scales = inits.get(scale)
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        if (table is None or scales is None or table.data_type != TensorProto.INT8
                or to != TensorProto.FLOAT or scales.data_type != TensorProto.FLOAT
                or len(table.dims) != 2 or list(scales.dims) != [table.dims[0], 1]):
            continue
        ids, out, stem = gather.input[1], gather.output[0], gather.output[0] + "__rows"
        replaced[index] = [
            helper.make_node("Gather", [table.name, ids], [stem + "_q"], axis=0,
                             name=gather.name + "__gather_q"),
            helper.make_node("Gather", [scale, ids], [stem + "_scale"], axis=0,
                             name=gather.name + "__gather_scale"),
            helper.make_node("Cast", [stem + "_q"], [stem + "_f"], to=TensorProto.FLOAT,
                             name=gather.name + "__cast"),
            helper.make_node("Mul", [stem + "_f", stem + "_scale"], [out],
                             name=gather.name + "__dequantize"),
        ]
        dropped |= {mul_at, cast_at}
    if not replaced:
        return model_bytes, 0
    kept: list[Any] = []
    for index, node in enumerate(nodes):
        if index in replaced:
            kept.extend(replaced[index])
        elif index not in dropped:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    return model.SerializeToString(), len(replaced)



def rewritten_in_child(model_bytes: bytes, timeout: float = 120.0) -> tuple[bytes, int]:
    """:func:`gather_before_dequantize` run in a child Python. Raises ``RuntimeError`` if the
    child fails (the caller may then load the original graph: same vectors, more memory)."""
    done = subprocess.run([sys.executable, "-m", __name__], input=model_bytes,
                          capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0 or len(done.stdout) < 4:
        raise RuntimeError(f"graph rewrite failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-500:]}")
    count = int.from_bytes(done.stdout[:4], "little")
    return done.stdout[4:], count


if __name__ == "__main__":
    data, rewrites = gather_before_dequantize(sys.stdin.buffer.read())
    sys.stdout.buffer.write(rewrites.to_bytes(4, "little") + data)
    sys.stdout.buffer.flush()
