"""The offline build. Importing `models` first bounds thread spinning before torch loads (see models/__init__.py)."""
import models  # noqa: F401
