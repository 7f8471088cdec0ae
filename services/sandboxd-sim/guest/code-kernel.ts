// sandboxd-sim guest — development substrate, not product code. The Python kernel code-interpreter.ts runs, one per
// context, inside the sandbox (kept as TypeScript text so a compiled simulator carries it). The source follows.
export const PYTHON_KERNEL = String.raw`# sandboxd-sim guest — development substrate, not product code. The Python kernel of one code-interpreter context
# (code-interpreter.ts): it runs inside the sandbox as the context's user, keeps its globals across executions as
# a Jupyter kernel does, and answers each request line ({"code", "env_vars"}) on its real stdout with one JSON line
# per event: stdout / stderr (whole lines as they are printed, stamped in Unix nanoseconds), number_of_executions, result (the value of a
# final expression), error (name, value, traceback), end_of_execution. The code's own stdout/stderr are redirected.
import ast, io, json, os, sys, time, traceback

_wire = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
_requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
sys.stdin = open(os.devnull)


def emit(msg):
    _wire.write(json.dumps(msg) + "\n")
    _wire.flush()


class Stream(io.TextIOBase):
    def __init__(self, kind):
        self.kind, self.pending = kind, ""

    def writable(self):
        return True

    def write(self, text):
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            emit({"type": self.kind, "text": line + "\n", "timestamp": time.time_ns()})
        return len(text)

    def flush(self):
        if self.pending:
            emit({"type": self.kind, "text": self.pending, "timestamp": time.time_ns()})
            self.pending = ""


out, err = Stream("stdout"), Stream("stderr")
sys.stdout, sys.stderr = out, err
namespace = {"__name__": "__main__"}
count = 0


def result_of(value):
    msg = {"type": "result", "text": repr(value), "is_main_result": True}
    for fmt, method in (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("latex", "_repr_latex_"), ("json", "_repr_json_")):
        f = getattr(value, method, None)
        if callable(f):
            try:
                data = f()
            except Exception:
                continue
            if data is not None:
                msg[fmt] = data
    return msg


for line in _requests:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    count += 1
    emit({"type": "number_of_executions", "execution_count": count})
    saved = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in (req.get("env_vars") or {}).items()})
    try:
        tree = ast.parse(req.get("code", ""), "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace) if last is not None else None
        out.flush(), err.flush()
        if value is not None:
            emit(result_of(value))
    except BaseException as e:  # SystemExit and KeyboardInterrupt included: the kernel survives the cell
        out.flush(), err.flush()
        emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": "".join(traceback.format_exception(e))})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    emit({"type": "end_of_execution"})
`;
