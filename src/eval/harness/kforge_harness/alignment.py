"""Which reference parameters go into which of the kernel model's: by name and shape, then,
for what is left, by shape in registration order. Pure: works on (name, shape, dtype)
lists, so the judge can plan it from what the worker reports without trusting it."""

from __future__ import annotations

from typing import Sequence, Tuple, TypedDict

# A parameter or buffer as (name, shape, dtype name): the judge's own, from its reference.
StateEntry = Tuple[str, Sequence[int], str]


class AlignmentReport(TypedDict):
    """The result's `alignment`: reference names matched by name, [reference, kernel] pairs
    matched by shape, and what was left on either side."""

    by_name: list[str]
    by_shape: list[list[str]]
    unmatched_reference: list[str]
    unmatched_kernel: list[str]


def _entry(entry: object) -> tuple[str, list[int], str] | None:
    """A worker's [name, shape, dtype] entry, or None where it is malformed."""
    if not (isinstance(entry, (list, tuple)) and len(entry) == 3):
        return None
    name, shape, dtype = entry
    if not (isinstance(name, str) and isinstance(shape, (list, tuple)) and isinstance(dtype, str)
            and all(isinstance(s, int) for s in shape)):
        return None
    return name, list(shape), dtype


def plan_alignment(ref_state: Sequence[StateEntry],
                   new_state: Sequence[object]) -> tuple[list[tuple[str, str]], AlignmentReport]:
    """ref_state: the reference's [(name, shape, dtype)]; new_state: the worker's, as it sent
    them. Returns (plan, report) where plan is [(reference name, kernel name)] and report says
    what was aligned and what not."""
    new: dict[str, tuple[list[int], str]] = {}
    order: list[str] = []
    for entry in new_state:
        checked = _entry(entry)
        if checked is None:
            continue  # a malformed entry from the worker matches nothing
        name, shape, dtype = checked
        new[name] = (shape, dtype)
        order.append(name)
    report = AlignmentReport(by_name=[], by_shape=[], unmatched_reference=[], unmatched_kernel=[])
    plan: list[tuple[str, str]] = []
    used: set[str] = set()
    leftovers: list[tuple[str, list[int], str]] = []
    for name, ref_shape, dtype in ref_state:
        if name in new and new[name] == (list(ref_shape), dtype):
            plan.append((name, name))
            used.add(name)
            report["by_name"].append(name)
        else:
            leftovers.append((name, list(ref_shape), dtype))
    remaining = [n for n in order if n not in used]
    for name, shape, dtype in leftovers:
        match = next((i for i, n in enumerate(remaining) if new[n] == (shape, dtype)), None)
        if match is None:
            report["unmatched_reference"].append(name)
            continue
        new_name = remaining.pop(match)
        plan.append((name, new_name))
        report["by_shape"].append([name, new_name])
    report["unmatched_kernel"] = remaining
    return plan, report
