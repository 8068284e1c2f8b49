"""Sentence embeddings as plain Python (no Django, no app): the encoder (all-MiniLM-L6-v2 as one ONNX
graph on onnxruntime) and the 8-bit arithmetic of stored vectors and window scans (quantized). The
memory app's semantic search (memory.semantic) stores, reads and schedules them; docs/search.md
describes the whole."""
