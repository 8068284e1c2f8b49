from __future__ import annotations

from django.core.management.base import BaseCommand

from conversations.management import user_named
from conversations.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API bearer token for USERNAME. The token is printed once; only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = user_named(username)
        token = api_token_create(user=user)
        self.stdout.write(token)
        self.stderr.write("Store it now: Buddy keeps only its hash and cannot show it again.")
