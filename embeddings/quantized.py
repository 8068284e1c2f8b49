"""8-bit arithmetic on onnxruntime for semantic search's two hot spots: the question's forward pass
(embeddings.encoder.encode_query) and the scan of a session's window of vectors (`similarities`).

Both are memory-bound on a small machine: a float32 window of 20,000 vectors is 31 MB, the model's
dense weights 42 MB, and both are read whole per search. In 8 bits they are a quarter of that, and
onnxruntime multiplies 8-bit integers directly (numpy only multiplies floats with BLAS), at an error of
at most 0.006 in a similarity (measured on 12,654 real vectors). If a session cannot be built or
fails, numpy does the same work, slower.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

logger = logging.getLogger(__name__)

# Codes are in ±RANGE: 7 bits, so that the u8 × s8 products of CPUs without VNNI cannot saturate
# (onnxruntime's `reduce_range`).
RANGE = 63


def session(model, *, disabled_optimizers: tuple[str, ...] = ()):
    """An onnxruntime session of the ONNX `model` on one thread (searches run side by side, as with
    OPENBLAS_NUM_THREADS=1), without the graph rewrites named in `disabled_optimizers`."""
    import onnxruntime  # not at the top: its start-up cost is paid by the first search, not every process

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        model.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=list(disabled_optimizers),
    )


def quantize_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 (rows, columns) → int8 codes of the same shape and a float32 scale per row, symmetric
    (matrix ≈ codes × scales[:, None])."""
    scales = np.abs(matrix).max(axis=1, initial=0.0).astype(np.float32)
    scales /= RANGE
    np.maximum(scales, 1e-12, out=scales)
    scaled = matrix / scales[:, None]
    np.rint(scaled, out=scaled)
    np.clip(scaled, -RANGE, RANGE, out=scaled)
    return scaled.astype(np.int8), scales


def similarities(codes: np.ndarray, scales: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`vector` · each column of codes × scales: the similarity of a question to each vector of a
    window quantized with `quantize_rows` and transposed (codes: int8, (DIMENSIONS, n), C-contiguous)."""
    if not codes.shape[1]:
        return np.zeros(0, dtype=np.float32)
    scanned = _run(
        "scanner", _build_scanner, {"vector": vector[None, :].astype(np.float32), "codes": codes, "scales": scales}
    )
    if scanned is None:
        return (vector @ codes.astype(np.float32)) * scales
    return scanned[0][0]


_sessions: dict[str, object] = {}
_lock = threading.Lock()


def _session_of(name: str, build):
    """The process's session `name`, built on first use; None (logged once) if it cannot be built."""
    if name not in _sessions:
        with _lock:
            if name not in _sessions:
                try:
                    _sessions[name] = build()
                except Exception:
                    logger.exception("The 8-bit %s could not be built: numpy does its work", name)
                    _sessions[name] = None
    return _sessions[name]


def _run(name: str, build, inputs: dict) -> list | None:
    """The outputs of session `name` on `inputs`; None where there is no such session, or it failed:
    then it is dropped for the process (logged once) and numpy does its work from then on."""
    session = _session_of(name, build)
    if session is None:
        return None
    try:
        return session.run(None, inputs)
    except Exception:
        with _lock:
            if _sessions.get(name) is session:
                logger.exception("The 8-bit %s failed: numpy does its work from now on", name)
                _sessions[name] = None
        return None


def _build_scanner():
    """The question (quantized per call, u8) times the window's codes (s8), scaled back to float32."""
    from onnx import TensorProto, helper  # not at the top: start-up cost, as onnxruntime

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
