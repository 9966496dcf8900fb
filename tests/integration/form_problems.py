"""Reading a refused form's problems off its page: the summary at the top and the words beside
each field, checked to be wired as the page promises (the field described by its problem, the
summary linking to it)."""

from __future__ import annotations

import html
import re


def summary(page: str) -> list[str]:
    """The summary's items, in words, in its order; empty when the page has none."""
    found = re.search(r'<div class="error-summary"[^>]*role="alert"[^>]*>(.*?)</div>', page, re.S)
    if found is None:
        return []
    items = re.findall(r"<li>(.*?)</li>", found[1], re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)).strip() for item in items]


def beside(page: str, input_id: str) -> str | None:
    """The words beside the field ``input_id``, whose element is described by them (and, but a
    fieldset, marked invalid) and whose line in the summary links to it; None when it has
    none."""
    found = re.search(rf'<span class="field-problem" id="{input_id}-problem">(.*?)</span>', page)
    if found is None:
        return None
    field = re.search(rf'<(input|textarea|select|fieldset)[^>]* id="{input_id}"[^>]*>', page)
    assert field is not None, page
    assert re.search(rf'aria-describedby="[^"]*\b{input_id}-problem\b', field[0]), field[0]
    if field[1] != "fieldset":
        assert 'aria-invalid="true"' in field[0], field[0]
    assert re.search(rf'<li><a href="#{input_id}">', page), page
    return html.unescape(found[1])
