"""Memory notes: short texts the model keeps with Anthropic's memory tool and the user sees and edits
(docs/memory.md). `paths` holds the rules of a path and a note, `services` every write (each keeps a
version), `selectors` the reads and the notes' part of the per-call context block, `tool` the memory
tool the model calls, `proposals` a profile change waiting for the user's yes and the question the
server asks about it."""
