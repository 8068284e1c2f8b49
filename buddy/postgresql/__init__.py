"""Django's PostgreSQL backend with a cheaper pool checkout (buddy/postgresql/base.py)."""
