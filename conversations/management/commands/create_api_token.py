from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API bearer token for USERNAME. The token is printed once; only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        token = api_token_create(user=user)
        self.stdout.write(token)
        self.stderr.write("Store it now: Buddy keeps only its hash and cannot show it again.")
