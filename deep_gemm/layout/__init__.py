"""layout family (filled in by its module files)."""

__all__: list[str] = []
