from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations import checks  # noqa: F401  (registers the system checks)
        from conversations.connections import fork_safety_register  # needs the settings loaded

        fork_safety_register()
