from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from agent.tasks import schedules_ensure
from conversations.services import agent_ensure_default


class Command(BaseCommand):
    help = "Make a fresh installation usable: the default agent, the housekeeping schedules, an admin user."

    def handle(self, *args, **options):
        agent_ensure_default()
        schedules_ensure()
        User = get_user_model()
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser(username="admin", email="", password=password)
            self.stdout.write(
                self.style.SUCCESS("Created the superuser 'admin' with the password: ")
                + password
                + "\nIt is shown only this once; change it with: python manage.py changepassword admin"
            )
