"""8-bit arithmetic of semantic search (embeddings.quantized): the window scan against float32."""

from __future__ import annotations

import numpy as np
import pytest

from embeddings import quantized
from embeddings.vectors import pack_rows, unpack


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_codes_and_scales_give_back_the_matrix() -> None:
    matrix = unit_rows(50, seed=1)

    codes, scales = quantized.quantize_rows(matrix)

    assert codes.dtype == np.int8 and scales.dtype == np.float32
    assert np.abs(codes).max() == quantized.RANGE
    assert np.abs(codes * scales[:, None] - matrix).max() <= scales.max() / 2 + 1e-7


@pytest.mark.parametrize("engine", ["onnxruntime", "numpy"])
def test_similarities_are_within_a_few_thousandths_of_float32(engine, monkeypatch) -> None:
    window = unit_rows(3000, seed=2)
    question = window[17] + 0.5 * unit_rows(1, seed=3)[0]
    question /= np.linalg.norm(question)
    codes, scales = quantized.quantize_rows(window)
    if engine == "numpy":  # onnx or onnxruntime missing
        monkeypatch.setitem(quantized._sessions, "scanner", None)
    else:
        assert quantized._session_of("scanner", quantized._build_scanner) is not None, "onnxruntime is a dependency"

    scores = quantized.similarities(np.ascontiguousarray(codes.T), scales, question)

    exact = window @ question
    assert scores.shape == (3000,)
    assert np.abs(scores - exact).max() < 0.005
    assert np.argmax(scores) == 17
    assert len(set(np.argsort(-scores)[:50]) & set(np.argsort(-exact)[:50])) >= 45


def test_an_empty_window_has_no_similarities() -> None:
    codes, scales = quantized.quantize_rows(np.zeros((0, 384), dtype=np.float32))

    assert quantized.similarities(codes.T, scales, unit_rows(1, seed=4)[0]).shape == (0,)


def test_a_scan_that_cannot_be_built_logs_and_uses_numpy(monkeypatch, caplog) -> None:
    def broken():
        raise RuntimeError("no MatMulInteger here")

    monkeypatch.setattr(quantized, "_build_scanner", broken)
    monkeypatch.delitem(quantized._sessions, "scanner", raising=False)
    window = unit_rows(10, seed=5)
    codes, scales = quantized.quantize_rows(window)

    scores = quantized.similarities(np.ascontiguousarray(codes.T), scales, window[3])

    assert np.argmax(scores) == 3
    assert "8-bit scanner could not be built" in caplog.text


def test_stored_vectors_are_the_codes_the_window_scan_multiplies() -> None:
    from memory import semantic

    vectors = unit_rows(500, seed=6) * 1.3  # a message's own vector plus a share of the one before
    vectors[7] = 0  # an empty message's vector
    codes, scales = quantized.quantize_rows(vectors)

    stored = pack_rows(vectors)
    window = semantic._as_window(list(zip(range(500, 0, -1), stored, strict=True)), checked_at=0.0)

    assert {len(blob) for blob in stored} == {4 + 384}
    assert window.ids.tolist() == list(range(1, 501))  # in id order, whatever order the rows came in
    assert window.codes.shape == (384, 500) and window.codes.dtype == np.int8 and window.codes.flags.c_contiguous
    np.testing.assert_array_equal(window.codes, codes[::-1].T)
    np.testing.assert_array_equal(window.scales, scales[::-1])
    assert not window.codes[:, 500 - 1 - 7].any()
    np.testing.assert_array_equal(unpack(stored), codes * scales[:, None])
    assert np.abs(unpack(stored) - vectors).max() <= scales.max() / 2 + 1e-7


def test_a_scan_failing_at_run_time_logs_once_and_uses_numpy(monkeypatch, caplog) -> None:
    class Broken:
        def run(self, outputs, inputs):
            raise RuntimeError("onnxruntime: bad allocation")

    monkeypatch.setitem(quantized._sessions, "scanner", Broken())
    window = unit_rows(10, seed=7)
    codes, scales = quantized.quantize_rows(window)

    for _ in range(2):
        scores = quantized.similarities(np.ascontiguousarray(codes.T), scales, window[4])
        assert np.argmax(scores) == 4
    assert caplog.text.count("8-bit scanner failed") == 1
    assert quantized._sessions["scanner"] is None


def test_similarities_of_real_message_vectors_are_within_a_hundredth() -> None:
    from embeddings import encoder
    from memory import semantic

    texts = [
        f"{opening} {subject} {ending}"
        for opening in ("We talked about", "Remind me of", "I booked", "Priya said something about")
        for subject in ("the dentist on Tuesday", "the Berlin office", "a new laptop", "the harbour walk", "dinner")
        for ending in ("again.", "— it went fine.")
    ]
    own = encoder.encode(texts)
    combined = np.vstack([own[0], own[1:] + semantic.CONTEXT_WEIGHT * own[:-1]])  # as written
    window = semantic._as_window(list(enumerate(pack_rows(combined))), checked_at=0.0)
    question = encoder.encode_query("When do I see the dentist?")

    scores = quantized.similarities(window.codes, window.scales, question)

    exact = combined @ question
    assert np.abs(scores - exact).max() < 0.01
    assert set(np.argsort(-scores)[:3]) == set(np.argsort(-exact)[:3])
