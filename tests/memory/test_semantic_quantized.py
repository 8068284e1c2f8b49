"""8-bit arithmetic of semantic search (memory.semantic.quantized): the window scan against float32."""

from __future__ import annotations

import numpy as np
import pytest

from memory.semantic import quantized


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_codes_and_scales_give_back_the_matrix() -> None:
    matrix = unit_rows(50, seed=1).T

    codes, scales = quantized.quantize_columns(matrix)

    assert codes.dtype == np.int8 and scales.dtype == np.float32
    assert np.abs(codes).max() <= quantized.RANGE
    assert np.abs(codes * scales - matrix).max() <= scales.max() / 2 + 1e-7


@pytest.mark.parametrize("engine", ["onnxruntime", "numpy"])
def test_similarities_are_within_a_few_thousandths_of_float32(engine, monkeypatch) -> None:
    window = unit_rows(3000, seed=2)
    question = window[17] + 0.5 * unit_rows(1, seed=3)[0]
    question /= np.linalg.norm(question)
    codes, scales = quantized.quantize_columns(window.T)
    if engine == "numpy":  # onnx or onnxruntime missing
        monkeypatch.setattr(quantized, "_scanner_session", None)
    else:
        assert quantized._scanner() is not None, "onnxruntime is a dependency: the 8-bit scan must run"

    scores = quantized.similarities(np.ascontiguousarray(codes), scales, question)

    exact = window @ question
    assert scores.shape == (3000,)
    assert np.abs(scores - exact).max() < 0.005
    assert np.argmax(scores) == 17
    assert len(set(np.argsort(-scores)[:50]) & set(np.argsort(-exact)[:50])) >= 45


def test_an_empty_window_has_no_similarities() -> None:
    codes, scales = quantized.quantize_columns(np.zeros((384, 0), dtype=np.float32))

    assert quantized.similarities(codes, scales, unit_rows(1, seed=4)[0]).shape == (0,)


def test_a_scan_that_cannot_be_built_logs_and_uses_numpy(monkeypatch, caplog) -> None:
    def broken():
        raise RuntimeError("no MatMulInteger here")

    monkeypatch.setattr(quantized, "_build_scanner", broken)
    monkeypatch.setattr(quantized, "_scanner_session", quantized._UNBUILT)
    window = unit_rows(10, seed=5)
    codes, scales = quantized.quantize_columns(window.T)

    scores = quantized.similarities(np.ascontiguousarray(codes), scales, window[3])

    assert np.argmax(scores) == 3
    assert "8-bit window scan could not be built" in caplog.text
