"""Which greedy evaluations of an rlx run's result.json evaluate a new
policy, for summary.py and curve.py.

An evaluation after (almost) no updates since the one kept before it
evaluates the same policy again: the iterations before `learning_starts`,
and those of a resumed CQL run while it reads the dataset again (a
resumed run's first iteration of learning makes a single update). "Almost
none" is under 1 % of the largest step in `num_env_steps_trained` between
two evaluations, so no batch size is needed. The first evaluation is kept.
"""


def new_policy_evaluations(rows):
    """The rows of `rows` (result.json's lines) that hold an evaluation of
    a policy not evaluated before, in order."""
    evals = [r for r in rows if "evaluation" in r]
    trained = [r.get("num_env_steps_trained") for r in evals]
    steps = [b - a for a, b in zip(trained, trained[1:]) if a is not None and b is not None]
    least = max(steps, default=0) / 100
    kept, last = [], None
    for r, t in zip(evals, trained):
        if not kept or t is None or last is None or t - last > least:
            kept.append(r)
            last = t
    return kept
