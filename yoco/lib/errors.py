"""Errors every layer may raise and show."""


class ActionError(ValueError):
    """A refused change, with a message fit to show to the person who asked for it."""
