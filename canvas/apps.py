from django.apps import AppConfig


class CanvasConfig(AppConfig):
    name = "canvas"
    verbose_name = "Canvas"

    def ready(self) -> None:
        from canvas import signals  # noqa: F401  (connects the receivers)
