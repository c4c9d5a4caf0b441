"""The embedder's memory measures: the gather-before-dequantize rewrite and the fixed mmap
threshold. Both must leave the vectors exactly as they were and do what they claim."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from everos_reflect.embedding import local as local_module
from everos_reflect.embedding.graph import gather_before_dequantize, rewritten_in_child
from everos_reflect.embedding.heap import fix_mmap_threshold
from everos_reflect.embedding.local import REWRITTEN_SHA256, LocalEmbedder, default_model_path

TEXTS = [
    "Caroline went to an LGBTQ support group",
    "x",
    "a much longer sentence about a weekend at the beach with the whole family " * 12,
    "",
]


def _session(model: bytes | str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.inter_op_num_threads = options.intra_op_num_threads = 1
    return ort.InferenceSession(model, sess_options=options,
                                providers=["CPUExecutionProvider"],
                                disabled_optimizers=["ConstantFolding"])


def _lookup_model(scale_dims: list[int]) -> bytes:
    """A tiny int8 table with the quantized-lookup pattern: Gather(Mul(Cast(q), scale), ids)."""
    rng = np.random.default_rng(7)
    table = rng.integers(-128, 128, size=(10, 4), dtype=np.int8)
    scale = rng.random(scale_dims, dtype=np.float32) + 0.01
    nodes = [
        helper.make_node("Cast", ["q"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "scale"], ["w"]),
        helper.make_node("Gather", ["w", "ids"], ["out"], axis=0),
    ]
    graph = helper.make_graph(
        nodes, "lookup",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [None, None])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(table, "q"), numpy_helper.from_array(scale, "scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_rewrite_of_a_per_row_lookup_is_exact_including_negative_ids() -> None:
    original = _lookup_model([10, 1])
    rewritten, count = gather_before_dequantize(original)
    assert count == 1
    ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
    assert ops.index("Gather") < ops.index("Cast")  # rows looked up before dequantizing
    ids = np.array([[0, 3, 9, -1], [5, 5, -10, 2]], dtype=np.int64)
    (before,) = _session(original).run(None, {"ids": ids})
    (after,) = _session(rewritten).run(None, {"ids": ids})
    np.testing.assert_array_equal(after, before)


def test_rewrite_leaves_a_per_column_scale_alone() -> None:
    """Gathering a per-column scale by row ids would be wrong: that graph must stay as it is."""
    original = _lookup_model([1, 4])
    assert gather_before_dequantize(original) == (original, 0)


def test_bundled_model_rewrite_gives_bit_identical_hidden_states() -> None:
    original = default_model_path().read_bytes()
    rewritten, count = gather_before_dequantize(original)
    assert count == 2  # token and position embedding tables
    embedder = LocalEmbedder(threads=1)
    embedder.load()
    for text in TEXTS:
        ids = np.array([embedder._tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids)}
        (before,) = _session(original).run(["last_hidden_state"], feed)
        (after,) = _session(rewritten).run(["last_hidden_state"], feed)
        np.testing.assert_array_equal(after, before)


def test_low_memory_embedder_vectors_equal_the_original_graph_s(tmp_path: Path) -> None:
    """The default (rewritten graph, no arena) against a session of the file as shipped."""
    embedder = LocalEmbedder(threads=1, low_memory=True)
    vectors = embedder.embed(TEXTS)
    plain = _session(str(default_model_path()))
    for text, vector in zip(TEXTS, vectors, strict=True):
        ids = np.array([embedder._tokenizer.encode(text).ids], dtype=np.int64)
        (hidden,) = plain.run(["last_hidden_state"], {
            "input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)})
        pooled = hidden[0].mean(axis=0)
        np.testing.assert_allclose(vector, pooled / np.linalg.norm(pooled), atol=1e-6)


#: Run in a fresh interpreter: in the test process, threads other tests left running (a
#: watcher, LanceDB's pools) allocate and free beside the measure and moved RssAnon by tens
#: of MB under load (seen once: 19 MB freed where 48 were). argv[1]: "fixed" or "default".
MMAP_SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util, sys
    from pathlib import Path

    from everos_reflect.embedding.heap import fix_mmap_threshold

    def rss_anon_mb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no RssAnon in /proc/self/status")

    if sys.argv[1] == "fixed":
        assert fix_mmap_threshold()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    mb = 2**20
    warm = libc.malloc(4 * mb)  # freeing a 4 MB mapped block raises glibc's floating
    ctypes.memset(warm, 1, 4 * mb)  # threshold past the 1 MB blocks below
    libc.free(warm)
    blocks = []
    for _ in range(96):
        block = libc.malloc(mb)
        ctypes.memset(block, 1, mb)  # touched, so resident
        blocks.append(block)
    grown = rss_anon_mb()
    for block in blocks[::2]:  # every other one: the live ones pin the heap between them
        libc.free(block)
    print(grown - rss_anon_mb())
""")


def _freed_mb(mode: str) -> float:
    """MB of resident anonymous memory that freeing 48 of 96 live 1 MB blocks gave back."""
    done = subprocess.run([sys.executable, "-c", MMAP_SCRIPT, mode], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return float(done.stdout.split()[-1])


def test_fixed_mmap_threshold_returns_freed_large_blocks_to_the_kernel() -> None:
    """Large blocks freed between live ones (the pattern of a model call): with glibc's
    default, a threshold that rises to the largest mapped block freed, they would come from
    the heap and stay resident after ``free``; with the threshold fixed they leave at once."""
    assert _freed_mb("fixed") > 40  # of the 48 MB freed


def test_without_the_fixed_threshold_freed_blocks_stay_resident() -> None:
    # the check above can fail: the same frees under glibc's floating threshold give back
    # next to nothing
    assert _freed_mb("default") < 8


def test_fixed_mmap_threshold_rejects_a_tiny_threshold() -> None:
    with pytest.raises(ValueError, match="at least 4096"):
        fix_mmap_threshold(100)


def test_child_process_rewrite_gives_the_same_graph_as_in_process() -> None:
    original = _lookup_model([10, 1])
    assert rewritten_in_child(original) == gather_before_dequantize(original)
    with pytest.raises(RuntimeError, match="graph rewrite failed"):
        rewritten_in_child(b"not an onnx model")


# -- the rewritten model's cache ------------------------------------------------------------


def _cached_files(cache: Path) -> list[Path]:
    return sorted((cache / "everos-reflect").glob("*.onnx"))


def test_bundled_model_rewrite_has_the_pinned_sha256() -> None:
    """The cache trusts a file only if it hashes to REWRITTEN_SHA256: the rewrite of the
    shipped model must produce exactly those bytes (else nothing would ever be cached)."""
    rewritten, _ = gather_before_dequantize(default_model_path().read_bytes())
    assert hashlib.sha256(rewritten).hexdigest() == REWRITTEN_SHA256


def test_rewritten_model_is_cached_and_later_loads_skip_the_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = LocalEmbedder(threads=1).embed(TEXTS)
    [cached] = _cached_files(tmp_path)
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == REWRITTEN_SHA256

    def no_child(_: bytes) -> tuple[bytes, int]:
        raise AssertionError("the rewrite ran again although it was cached")

    monkeypatch.setattr(local_module, "rewritten_in_child", no_child)
    np.testing.assert_array_equal(LocalEmbedder(threads=1).embed(TEXTS), first)


def test_a_corrupt_cached_model_is_rewritten_again_and_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    expected = LocalEmbedder(threads=1).embed(TEXTS)
    [cached] = _cached_files(tmp_path)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped weight byte: still a loadable model
    cached.write_bytes(bytes(data))
    np.testing.assert_array_equal(LocalEmbedder(threads=1).embed(TEXTS), expected)
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == REWRITTEN_SHA256
    assert _cached_files(tmp_path) == [cached]  # no temp file left behind


def test_an_unwritable_cache_only_costs_the_rewrite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    rewrites: list[int] = []
    real = local_module.rewritten_in_child

    def counted(model: bytes) -> tuple[bytes, int]:
        rewrites.append(1)
        return real(model)

    monkeypatch.setattr(local_module, "rewritten_in_child", counted)
    first = LocalEmbedder(threads=1).embed(TEXTS)
    np.testing.assert_array_equal(LocalEmbedder(threads=1).embed(TEXTS), first)
    assert len(rewrites) == 2
