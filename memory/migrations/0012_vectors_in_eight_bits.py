"""Stored sentence vectors in 8 bits: each float16 vector (768 bytes) becomes its scale and its 8-bit
codes (388 bytes), what the window scan multiplies (memory/semantic/__init__.py, _PACKED). Batch by
batch, each in its own transaction: a migration stopped half way goes on where it stopped (a vector's
length tells its format). On PostgreSQL the table is rewritten afterwards (VACUUM FULL), so that a
chat's vectors lie as densely as new ones: it is locked while that runs.

The arithmetic is written out here, as it was when this migration was written (memory.semantic may
change later): a symmetric scale per vector, max |x| / 63, and codes rounded half to even.
"""

from django.db import connection, migrations, transaction

DIMENSIONS = 384
RANGE = 63
FLOAT16_BYTES = DIMENSIONS * 2
EIGHT_BIT_BYTES = 4 + DIMENSIONS
BATCH = 5_000


def _eight_bits(blobs: list[bytes]) -> list[bytes]:
    import numpy as np

    vectors = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(blobs), DIMENSIONS).astype(np.float32)
    scales = np.maximum(np.abs(vectors).max(axis=1, initial=0.0) / RANGE, 1e-12).astype(np.float32)
    codes = np.clip(np.rint(vectors / scales[:, None]), -RANGE, RANGE).astype(np.int8)
    packed = np.empty(len(blobs), dtype=np.dtype([("scale", "<f4"), ("codes", "i1", (DIMENSIONS,))]))
    packed["scale"], packed["codes"] = scales, codes
    return [row.tobytes() for row in packed]


def _float16(blobs: list[bytes]) -> list[bytes]:
    import numpy as np

    packed = np.frombuffer(b"".join(blobs), dtype=np.dtype([("scale", "<f4"), ("codes", "i1", (DIMENSIONS,))]))
    vectors = (packed["codes"].astype(np.float32) * packed["scale"][:, None]).astype(np.float16)
    return [row.tobytes() for row in vectors]


def _convert(schema_editor, *, length: int, convert) -> None:
    """Rewrite every stored vector of `length` bytes with `convert`, in id order, BATCH at a time."""
    after = 0
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT message_id, vector FROM memory_messagevector WHERE message_id > %s ORDER BY message_id LIMIT %s",
                [after, BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            after = rows[-1][0]
            old = [(message_id, bytes(vector)) for message_id, vector in rows if len(vector) == length]
            if not old:
                continue
            new = convert([vector for _, vector in old])
            with transaction.atomic(using=schema_editor.connection.alias):
                if schema_editor.connection.vendor == "postgresql":
                    cursor.execute(
                        "UPDATE memory_messagevector AS v SET vector = n.vector"
                        " FROM unnest(%s::bigint[], %s::bytea[]) AS n(message_id, vector)"
                        " WHERE v.message_id = n.message_id",
                        [[message_id for message_id, _ in old], new],
                    )
                else:
                    cursor.executemany(
                        "UPDATE memory_messagevector SET vector = %s WHERE message_id = %s",
                        [(vector, message_id) for (message_id, _), vector in zip(old, new, strict=True)],
                    )
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute("VACUUM FULL memory_messagevector")


def forwards(apps, schema_editor):
    _convert(schema_editor, length=FLOAT16_BYTES, convert=_eight_bits)


def backwards(apps, schema_editor):
    _convert(schema_editor, length=EIGHT_BIT_BYTES, convert=_float16)


class Migration(migrations.Migration):
    atomic = False  # batches commit one by one; VACUUM cannot run inside a transaction

    dependencies = [("memory", "0011_vector_whole_function")]

    operations = [migrations.RunPython(forwards, backwards)]
