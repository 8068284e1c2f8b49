"""Memory notes: short texts the model keeps with Anthropic's memory tool and the user sees and edits
(docs/memory.md). `paths` holds the rules of a path and a note, `services` every write (each keeps a
version), `selectors` the reads, `tool` the memory tool the model calls, `context` the notes' lines
in the per-call context block."""
