"""Errors raised while reading the catalogue."""


class InvalidItem(ValueError):
    """A catalogue row that cannot become an item."""

    def __init__(self, line_no, reason):
        super().__init__("line %d: %s" % (line_no, reason))
        self.line_no = line_no
        self.reason = reason
