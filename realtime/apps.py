from django.apps import AppConfig


class RealtimeConfig(AppConfig):
    name = "realtime"
    verbose_name = "Real time"

    def ready(self) -> None:
        from realtime import signals  # noqa: F401  (connects the receivers)
