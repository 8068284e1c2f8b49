"""8-bit arithmetic on onnxruntime for semantic search's two hot spots: the question's forward pass
(memory.semantic.encoder.encode_query) and the scan of a session's window of vectors (`similarities`).

Both are memory-bound on a small machine: a float32 window of 20,000 vectors is 31 MB, the model's
dense weights 42 MB, and both are read whole per search. In 8 bits they are a quarter of that, and
onnxruntime multiplies 8-bit integers directly (numpy only multiplies floats with BLAS). The scan went
from 3.5 ms to ~0.7 ms at 20,000 vectors, an error of at most ~0.003 in a similarity
(docs/bench-search.md). Without onnx or onnxruntime (a broken install: both are dependencies) the same
results come from numpy, slower.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

logger = logging.getLogger(__name__)

# Codes are in ±RANGE: 7 bits, so that the u8 × s8 products of CPUs without VNNI cannot saturate
# (onnxruntime's `reduce_range`).
RANGE = 63


def session(model):
    """An onnxruntime session of the ONNX `model` on one thread (searches run side by side, as with
    OPENBLAS_NUM_THREADS=1), or None where onnxruntime is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def quantize_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 (rows, columns) → int8 codes of the same shape and a float32 scale per column, symmetric
    (matrix ≈ codes × scales)."""
    scales = (np.maximum(np.abs(matrix).max(axis=0, initial=0.0), 1e-12) / RANGE).astype(np.float32)
    codes = np.clip(np.rint(matrix / scales), -RANGE, RANGE).astype(np.int8)
    return codes, scales


def similarities(codes: np.ndarray, scales: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`vector` · each column of codes × scales: the similarity of a question to each vector of a
    window quantized with `quantize_columns` (codes: int8, (DIMENSIONS, n), C-contiguous)."""
    if not codes.shape[1]:
        return np.zeros(0, dtype=np.float32)
    scanner = _scanner()
    if scanner is None:
        return (vector @ codes.astype(np.float32)) * scales
    return scanner.run(None, {"vector": vector[None, :].astype(np.float32), "codes": codes, "scales": scales})[0][0]


_UNBUILT = object()
_scanner_session = _UNBUILT
_lock = threading.Lock()


def _scanner():
    global _scanner_session
    if _scanner_session is _UNBUILT:
        with _lock:
            if _scanner_session is _UNBUILT:
                try:
                    _scanner_session = _build_scanner()
                except Exception:
                    logger.exception("The 8-bit window scan could not be built: windows are scanned in numpy")
                    _scanner_session = None
    return _scanner_session


def _build_scanner():
    """The question (quantized per call, u8) times the window's codes (s8), scaled back to float32."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        return None
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["vector"], ["vector_codes", "vector_scale", "vector_zero"]),
        helper.make_node("MatMulInteger", ["vector_codes", "codes", "vector_zero"], ["products"]),
        helper.make_node("Cast", ["products"], ["products_float"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["scales", "vector_scale"], ["column_scales"]),
        helper.make_node("Mul", ["products_float", "column_scales"], ["similarities"]),
    ]
    graph = helper.make_graph(
        nodes,
        "window_scan",
        [
            helper.make_tensor_value_info("vector", TensorProto.FLOAT, [1, "dimensions"]),
            helper.make_tensor_value_info("codes", TensorProto.INT8, ["dimensions", "vectors"]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, ["vectors"]),
        ],
        [helper.make_tensor_value_info("similarities", TensorProto.FLOAT, [1, "vectors"])],
    )
    return session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
