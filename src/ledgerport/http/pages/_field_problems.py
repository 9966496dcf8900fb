"""A refused form's problems where the eye is: each beside its field, named by the field's own
label (the "Address" a person reads, never the ``slug`` the domain calls it), and a summary at
the top of the page linking to each field.

The domain says a problem in one sentence that begins with the field's internal name (``slug
must be 3 to 60 lower-case letters ...``, as the JSON API answers it). A form states its fields
as :class:`FormField` (the internal names its problems use, the input's id, the label), and
:func:`field_problems` puts each sentence beside its field with the label in place of the
name; a sentence that names no field stays in the summary only.

Everything here is pure: the templates show a :class:`FormProblems` with the macros of
``_form_problems.html`` (the summary with ``id="problems"``, which the form's action names as
its fragment so the answer opens scrolled there, and each field's ``aria-invalid`` and
``aria-describedby``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FormField:
    """One field of a form, as its problems name it and as the page shows it."""

    input_id: str
    """The id of its input (or of its fieldset): the summary's link and the problem's owner."""
    label: str
    """Its label on the page, which its problems are said with."""
    names: tuple[str, ...]
    """How the domain's sentences name it (``slug``; ``screenshotAssetIds``)."""


@dataclass(frozen=True)
class FieldProblem:
    """One problem of a refused form, in words that name the field by its label."""

    text: str
    input_id: str | None
    """The field it is beside, or None for a problem of the form as a whole."""

    @property
    def described_by(self) -> str:
        """The id of the problem's words beside its field (``aria-describedby``)."""
        return f"{self.input_id}-problem"


@dataclass(frozen=True)
class FormProblems:
    """Every problem of a refused form: the summary's heading and items, and each field's."""

    heading: str
    items: tuple[FieldProblem, ...]

    def of(self, input_id: str) -> FieldProblem | None:
        """The (first) problem beside the field ``input_id``, if it has one."""
        return next((item for item in self.items if item.input_id == input_id), None)

    def __bool__(self) -> bool:
        return bool(self.items)


def _heading(count: int, outcome: str) -> str:
    if count == 1:
        return f"There is a problem: {outcome}"
    return f"There are {count} problems: {outcome}"


def _names(message: str, name: str) -> bool:
    """Whether ``message`` begins with the field's internal ``name`` as a word (``slug must``,
    ``redirectUris, line 2,``), not as the start of a longer one."""
    rest = message[len(name) :]
    return message.startswith(name) and not (rest[:1].isalnum() or rest[:1] in "_.")


def _labelled(message: str, fields: Sequence[FormField]) -> FieldProblem:
    for field in fields:
        for name in field.names:
            if _names(message, name):
                return FieldProblem(field.label + message[len(name) :], field.input_id)
    return FieldProblem(message[:1].upper() + message[1:], None)


def field_problems(
    messages: Sequence[str], fields: Sequence[FormField], *, outcome: str
) -> FormProblems:
    """``messages`` (the domain's sentences) beside the ``fields`` they name, said with each
    field's label; ``outcome`` is what did not happen ("the listing was not saved"), for the
    summary's heading.
    The summary lists them in the order of ``fields``, the form's order, then the rest."""
    found = [_labelled(message, fields) for message in messages]
    order = {field.input_id: index for index, field in enumerate(fields)}
    items = sorted(found, key=lambda item: order.get(item.input_id or "", len(order)))
    return FormProblems(_heading(len(items), outcome), tuple(items))


def one_field_problem(text: str, input_id: str | None, *, outcome: str) -> FormProblems:
    """A single problem already said in words, beside the field ``input_id``."""
    return FormProblems(_heading(1, outcome), (FieldProblem(text, input_id),))


def refused_beside(
    sentences: Sequence[str],
    fields: Sequence[FormField],
    *,
    outcome: str,
    owner: str | None = None,
) -> FormProblems:
    """A refusal said in ``sentences`` (a notice's, :attr:`Notice.sentences`) beside the
    ``fields`` they name; ``owner`` is the field a problem that names none belongs to, when
    the refusal's kind says which (a business nobody may choose: the business field)."""
    if owner is not None and not any(_labelled(s, fields).input_id for s in sentences):
        return FormProblems(
            _heading(len(sentences), outcome),
            tuple(FieldProblem(s[:1].upper() + s[1:], owner) for s in sentences),
        )
    return field_problems(sentences, fields, outcome=outcome)
