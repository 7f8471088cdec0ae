"""The record every script of this folder keeps: what each case returned or raised (run by python-run.ts)."""

out = {}


def record(case, fn):
    try:
        value = fn()
        out[case] = {"returned": value if isinstance(value, (bool, int, str, type(None))) else type(value).__name__}
    except Exception as e:  # the point is what was raised
        out[case] = {"raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}
