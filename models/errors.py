"""Errors a user can cause. The UI edge turns them into messages; nothing else catches them."""


class InputError(ValueError):
    """The input cannot be answered as given (empty, too long, unknown variant)."""


class UnknownVariant(InputError):
    """The preset has no variant of that name: a fact about the variant, whatever the question."""


class VariantUnavailable(RuntimeError):
    """The variant exists in the catalog but its weights are not built or cannot be loaded."""


class ConfigError(ValueError):
    """A setting (option, environment or repository variable) is malformed or points at nothing."""


def fault_message(error: Exception) -> str:
    """A variant's column line for a fault of ours (not the visitor's): its class, the details in the server's log."""
    return f"this variant failed ({type(error).__name__}; the server's log has the details)"


def typed_text(value, name: str) -> str:
    """A visitor's text as the tokenizers need it ("" for none): any other type, or a lone surrogate (JSON can
    carry one; no tokenizer reads it), is said as an InputError rather than raised from inside a tokenizer."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"The {name} must be text (got {type(value).__name__}).")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(f"The {name} holds an invalid character (U+{ord(error.object[error.start]):04X} at "
                         f"position {error.start}).") from None
    return value
