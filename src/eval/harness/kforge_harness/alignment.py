"""Which reference parameters go into which of the kernel model's: by name and shape, then,
for what is left, by shape in registration order. Pure: works on (name, shape, dtype)
lists, so the judge can plan it from what the worker reports without trusting it."""


def plan_alignment(ref_state, new_state):
    """ref_state, new_state: [(name, shape, dtype)]. Returns (plan, report) where plan is
    [(reference name, kernel name)] and report says what was aligned and what not."""
    new = {}
    order = []
    for entry in new_state:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 3 and isinstance(entry[0], str)):
            continue  # a malformed entry from the worker matches nothing
        name, shape, dtype = entry
        new[name] = (list(shape), dtype)
        order.append(name)
    report = {"by_name": [], "by_shape": [], "unmatched_reference": [], "unmatched_kernel": []}
    plan = []
    used = set()
    leftovers = []
    for name, shape, dtype in ref_state:
        if name in new and new[name] == (list(shape), dtype):
            plan.append((name, name))
            used.add(name)
            report["by_name"].append(name)
        else:
            leftovers.append((name, list(shape), dtype))
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
