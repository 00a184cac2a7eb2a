"""Text in, comparable text out: HTML to text and a page's main text (:mod:`.html`), widths,
punctuation, whitespace and title clean-up (:mod:`.normalize`), dates in one form (:mod:`.dates`),
and the one compiled pass that tells which of those patterns a text needs (:mod:`.hints`)."""
