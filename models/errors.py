"""Errors a user can cause. The UI edge turns them into messages; nothing else catches them."""


class InputError(ValueError):
    """The input cannot be answered as given (empty, too long, unknown variant)."""


class UnknownVariant(InputError):
    """The preset has no variant of that name: a fact about the variant, whatever the question."""


class VariantUnavailable(RuntimeError):
    """The variant exists in the catalog but its weights are not built or cannot be loaded."""


class ConfigError(ValueError):
    """A setting (option, environment or repository variable) is malformed or points at nothing."""
