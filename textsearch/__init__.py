"""Text search as plain Python (no Django, no app): what a text's terms are (text), what a question
says besides its words (cues, speakers), and how candidates are scored (ranking). The memory app's
history search (memory.search) stores and looks up these terms in the database and ranks with them;
docs/search.md describes the whole."""
