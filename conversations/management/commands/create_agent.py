from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from conversations.services import agent_create_or_update


class Command(BaseCommand):
    help = "Create an agent, or update the one with that slug."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--avatar")
        parser.add_argument("--personality")
        parser.add_argument("--model")

    def handle(self, *args, slug: str, name: str, avatar, personality, model, **options):
        try:
            agent, created = agent_create_or_update(
                slug=slug, name=name, avatar=avatar, personality=personality, model=model
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"{'Created' if created else 'Updated'} agent {agent.slug} ({agent.name}).")
