"""Plain Python shared by the apps on every floor: no Django import, no app import (docs/architecture.md)."""
