"""Stored sentence vectors: each in 8 bits with its scale (PACKED), packed from and unpacked to float32
rows. The memory app stores them (memory.models.MessageVector) and scans a chat's window of them."""

from __future__ import annotations

import numpy as np

from embeddings import quantized
from embeddings.encoder import DIMENSIONS

# A stored vector (MessageVector.vector): its scale, then its 8-bit codes (quantized:
# vector ≈ codes × scale), 388 bytes. What the window scan multiplies, stored as it is used: a chat's
# window is read as half the bytes of float16, and needs no quantizing.
PACKED = np.dtype([("scale", "<f4"), ("codes", "i1", (DIMENSIONS,))])


def pack_rows(vectors: np.ndarray) -> list[bytes]:
    """Each row of `vectors` as stored (PACKED)."""
    codes, scales = quantized.quantize_rows(np.asarray(vectors, dtype=np.float32).reshape(-1, DIMENSIONS))
    rows = np.empty(len(codes), dtype=PACKED)
    rows["scale"], rows["codes"] = scales, codes
    return [row.tobytes() for row in rows]


def pack(vector: np.ndarray) -> bytes:
    return pack_rows(vector)[0]


def packed(blobs: list) -> np.ndarray:
    """Stored vectors (bytes, or memoryviews from PostgreSQL) as one array of PACKED."""
    return np.frombuffer(b"".join(blobs), dtype=PACKED)


def unpack(blobs: list) -> np.ndarray:
    """Matrix of stored vectors, one row each, float32."""
    rows = packed(blobs)
    return rows["codes"].astype(np.float32) * rows["scale"][:, None]
