"""Tools for developing Buddy, shared by tests/ and bench/: the fake Messages API, real server processes,
and conversation data (generated, or read from LoCoMo). Not a Django app and never imported by the apps."""
