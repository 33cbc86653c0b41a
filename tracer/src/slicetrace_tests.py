# Written by `trace run` beside sitecustomize.py, which loads it as the module `_slicetrace_tests`
# in every recorded Python process (it imports nothing until a test runner calls it). It records
# the tests a test runner runs: pytest loads it as a plugin (sitecustomize adds it to
# PYTEST_PLUGINS); `unittest`'s runner is reached through its result class.
#
# For each test it appends JSON lines to `tests.jsonl` in the process's trace directory
# (docs/trace-format.md, "tests.jsonl"): a "start" line when the test begins, a "finish" line with
# its phases, outcome and failure when it ends (a test whose process died has only its start),
# and the test's subtests (unittest's `self.subTest(...)`, pytest's `subtests` fixture) in it:
# each with its id (the test's id and the subtest's description), outcome and failure; they ran
# inside the test, between its boundaries, and have no boundaries of their own.
# It also calls _slicetrace_test_begin() and _slicetrace_test_end(), which do nothing: their calls
# are the test's boundaries in the thread's event stream, where `slice` cuts out each test's tree.
# Just before the begin call, _slicetrace.test_begins() re-arms the recorder's line events, so
# that every line the test runs is reported again inside its boundaries (lines per test).
# Kept valid in old Pythons (no f-strings), like sitecustomize.py.

import os
import sys

_OUTPUT_TAIL = 2000  # characters of captured output kept per stream
_TEXT = 4000  # characters of a message or a comparison
_FRAMES = 30  # traceback frames kept (the innermost)
_STATEMENT_LINES = 20  # lines of a failing statement kept
_SUBTESTS = 200  # subtests kept per test (the rest counted in "subtests_dropped")
_SUBTEST_FAILURES = 20  # failing subtests per test kept with their whole failure
_SUBTEST_ID = 1000  # characters of a subtest's id
_PARAMS = 20  # parameters of a failing parametrized test kept
_PARAM_TEXT = 160  # characters of a parameter's repr


def _slicetrace_test_begin():
    pass


def _slicetrace_test_end():
    pass


_state = {"pid": None, "fd": None, "seq": {}, "open": {}, "rearm": None}


def _out():
    pid = os.getpid()
    if _state["pid"] != pid:
        # A forked child writes into its own process directory.
        _state["pid"] = pid
        _state["fd"] = None
        _state["seq"] = {}
        _state["open"] = {}
        try:
            import _slicetrace

            _state["rearm"] = getattr(_slicetrace, "test_begins", None)
            d = _slicetrace.process_dir()
            if d is not None:
                _state["fd"] = os.open(
                    os.path.join(str(d), "tests.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
                )
        except Exception:
            _state["fd"] = None
    return _state["fd"]


def _write(record):
    fd = _out()
    if fd is None:
        return
    import json

    line = (json.dumps(record, ensure_ascii=True) + "\n").encode("ascii")
    try:
        os.write(fd, line)  # one write: a line is whole or absent
    except OSError:
        pass


def _tid():
    try:
        import threading

        return threading.get_native_id()
    except Exception:
        return os.getpid()


def _text(s, limit=_TEXT):
    if s is None:
        return None
    s = str(s)
    if len(s) > limit:
        s = s[:limit] + "... [%d more characters]" % (len(s) - limit)
    return s


def _tail(s):
    if not s:
        return None
    if len(s) > _OUTPUT_TAIL:
        s = "[%d characters before]...\n" % (len(s) - _OUTPUT_TAIL) + s[-_OUTPUT_TAIL:]
    return s


def _now():
    import time

    return time.monotonic_ns() if hasattr(time, "monotonic_ns") else int(time.monotonic() * 1e9)


def _params_text(params):
    """A parametrized test's parameters: [name, value's repr] pairs, each repr bounded by
    reprlib (nesting, items, characters), at most _PARAMS of them."""
    try:
        import reprlib

        r = reprlib.Repr()
        r.maxstring = r.maxother = _PARAM_TEXT
        r.maxlevel = 3
        r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 8
        r.maxdict = 6
        out = []
        for name, value in list(params.items())[:_PARAMS]:
            try:
                text = r.repr(value)
            except Exception as e:
                text = "<repr failed: %s>" % type(e).__name__
            out.append([_text(name, 200), _text(text, _PARAM_TEXT)])
        return out
    except Exception:
        return []


def _begin(test_id, runner, file=None, line=None, fixtures=None):
    tid = _tid()
    if _out() is None:
        return
    seq = _state["seq"].get(tid, 0)
    _state["seq"][tid] = seq + 1
    _state["open"][tid] = {"id": test_id, "seq": seq, "start_ns": _now(), "runner": runner}
    record = {"event": "start", "id": test_id, "runner": runner, "tid": tid, "seq": seq, "file": file, "line": line}
    if fixtures:
        record["fixtures"] = fixtures[:200]
    _write(record)
    rearm = _state["rearm"]
    if rearm is not None:
        rearm()
    _slicetrace_test_begin()


def _end(record, params=None):
    tid = _tid()
    _slicetrace_test_end()
    if params and record.get("outcome") in ("failed", "error") and record.get("failure") is not None:
        # After the test's end boundary: the values' __repr__ (the user's code) is not a call
        # of the test's.
        record["failure"]["params"] = _params_text(params)
    opened = _state["open"].pop(tid, None)
    if opened is None:
        return
    record["event"] = "finish"
    record["tid"] = tid
    record["seq"] = opened["seq"]
    record.setdefault("id", opened["id"])
    record["duration_ns"] = max(0, _now() - opened["start_ns"])
    _write(record)


def _add_subtest(record, sub):
    """Append a subtest (its id, outcome and, if any, duration, failure, output) to a test's
    finish record, within bounds that keep the finish line far under the reader's 1 MiB: ids
    of at most _SUBTEST_ID characters, at most _SUBTESTS subtests (the rest counted in
    "subtests_dropped"), the first
    _SUBTEST_FAILURES failing ones whole, later failures with only where and the first line of
    their message."""
    sub["id"] = _text(sub.get("id"), _SUBTEST_ID)  # (a subTest's message can be any length)
    outcome = sub.get("outcome")
    if outcome in ("failed", "error"):
        key = "_failed" if outcome == "failed" else "_errors"
        record[key] = record.get(key, 0) + 1
    subs = record.setdefault("subtests", [])
    if len(subs) >= _SUBTESTS:
        record["subtests_dropped"] = record.get("subtests_dropped", 0) + 1
        return
    failure = sub.get("failure")
    if failure is not None and outcome in ("failed", "error"):
        if record.get("_failed", 0) + record.get("_errors", 0) > _SUBTEST_FAILURES:
            kept = dict((k, failure[k]) for k in ("phase", "exception", "file", "line") if k in failure)
            if failure.get("message"):
                kept["message"] = _text(str(failure["message"]).split("\n", 1)[0], 300)
            sub["failure"] = kept
            sub.pop("output", None)
    subs.append(sub)


def _subtests_verdict(record):
    """The test's outcome as the runners report it: a test that passed itself but has failing
    subtests failed (only erroring ones, under unittest: error), with the failure saying how
    many (pytest's words, "contains 2 failed subtests")."""
    failed, errors = record.pop("_failed", 0), record.pop("_errors", 0)
    if not (failed or errors) or record.get("outcome") not in ("passed", None):
        return
    record["outcome"] = "failed" if failed else "error"
    if record.get("failure") is None:
        n = failed + errors
        record["failure"] = {"phase": "call", "message": "contains %d failed subtest%s" % (n, "" if n == 1 else "s")}


# ---------------------------------------------------------------- pytest


_pytest_state = {"config": None, "reports": {}, "items": {}, "names": {}, "params": {}}


def pytest_configure(config):
    _pytest_state["config"] = config


def _controller():
    # pytest-xdist's controller reports the workers' tests through the same hooks; the workers
    # (recorded processes of their own) record them where they ran. Asked when a test starts:
    # xdist registers its scheduler in a pytest_configure that may run after ours.
    config = _pytest_state["config"]
    if config is None or hasattr(config, "workerinput"):
        return False
    try:
        return bool(config.pluginmanager.hasplugin("dsession"))
    except Exception:
        return False


def pytest_runtest_protocol(item, nextitem):
    # Only looks: the item's file and fixtures, for the start line. Returns None, so pytest's
    # own protocol (and any plugin's) runs the test as always.
    try:
        callspec = getattr(item, "callspec", None)
        params = getattr(callspec, "params", None) if callspec is not None else None
        _pytest_state["items"][item.nodeid] = (
            str(getattr(item, "path", None) or item.fspath),
            list(item.fixturenames),
            params if isinstance(params, dict) and params else None,
        )
    except Exception:
        pass


def pytest_runtest_logstart(nodeid, location):
    if _controller():
        return
    _pytest_state["reports"][nodeid] = []
    file, line = None, None
    try:
        file = location[0]
        line = None if location[1] is None else int(location[1]) + 1
    except Exception:
        pass
    path, fixtures, params = _pytest_state["items"].pop(nodeid, (None, None, None))
    if params:
        _pytest_state["params"][nodeid] = params
    _begin(nodeid, "pytest", path or file, line, fixtures)


def pytest_exception_interact(node, call, report):
    # pytest calls it for a failure or an error (not a skip or an xfail), after logreport and
    # before logfinish: the traceback's function names, which pytest's long-style entries (the
    # test's frame and the innermost one) leave out. Only looks.
    if _controller():
        return
    try:
        names = [(str(e.path), e.lineno + 1, e.name) for e in call.excinfo.traceback[-_FRAMES * 4 :]]
        if _subtest_context(report) is not None:
            # Several subtests of a test fail in its call phase: each report keeps its own.
            report._slicetrace_names = names
        else:
            _pytest_state["names"][(report.nodeid, report.when)] = names
    except Exception:
        pass


def _frame_function(names, file, line):
    """The function of a traceback frame pytest shows (`file` as pytest prints it, relative to
    the invocation directory): the innermost entry of `names` at that line of that file."""
    try:
        want = os.path.abspath(file)
    except Exception:
        return None
    for path, lineno, name in reversed(names):
        if lineno == line and (path == want or path.endswith(os.sep + file) or path == file):
            return name
    return None


def _subtest_context(report):
    """A subtest's report (pytest 9's SubtestReport, of its `subtests` fixture and of
    unittest's subTest): its context (msg, kwargs); None for a test's own phase report."""
    context = getattr(report, "context", None)
    if context is None or not hasattr(context, "kwargs") or not hasattr(context, "msg"):
        return None
    return context


def _subtest_description(context):
    """`[msg] (k=v, ...)`, as pytest and unittest describe a subtest."""
    parts = []
    try:
        if context.msg is not None:
            parts.append("[%s]" % (context.msg,))
        if context.kwargs:
            parts.append("(%s)" % ", ".join("%s=%s" % (k, v) for k, v in context.kwargs.items()))
    except Exception:
        pass
    return " ".join(parts) or "(<subtest>)"


def _pytest_subtest(nodeid, report, context):
    sub = {"id": "%s %s" % (nodeid, _subtest_description(context)), "outcome": report.outcome}
    if hasattr(report, "wasxfail"):
        sub["outcome"] = "xfailed" if report.outcome == "skipped" else "xpassed"
    duration = int(getattr(report, "duration", 0) * 1e9)
    if duration > 0:  # (pytest gives unittest's subtests none)
        sub["duration_ns"] = duration
    failure = None
    if report.outcome == "failed":
        failure = _pytest_failure(report)
    elif report.outcome == "skipped" and sub["outcome"] == "skipped":
        failure = _pytest_skip(report)
    if failure is not None:
        sub["failure"] = failure
    output = {}
    for name, text in getattr(report, "sections", []):
        output[name] = text
    if output and report.outcome == "failed":
        sub["output"] = dict((k, _tail(v)) for k, v in output.items())
    return sub


def pytest_runtest_logreport(report):
    if _controller():
        return
    reports = _pytest_state["reports"].get(report.nodeid)
    if reports is not None:
        reports.append(report)


def pytest_runtest_logfinish(nodeid, location):
    if _controller():
        return
    reports = _pytest_state["reports"].pop(nodeid, [])
    names = _pytest_state["names"]
    for key in [k for k in names if k[0] == nodeid]:
        reports_names = names.pop(key)
        for r in reports:
            if r.when == key[1]:
                try:
                    r._slicetrace_names = reports_names
                except Exception:
                    pass
    phases = []
    failure = None
    outcome = "passed"
    output = {}
    subtests = []
    for r in reports:
        context = _subtest_context(r)
        if context is not None:
            subtests.append(_pytest_subtest(nodeid, r, context))
            continue
        phase = {"when": r.when, "outcome": r.outcome, "duration_ns": int(getattr(r, "duration", 0) * 1e9)}
        xfail = hasattr(r, "wasxfail")
        if xfail:
            phase["xfail"] = True
        phases.append(phase)
        if r.outcome == "failed":
            if r.when == "call":
                outcome = "failed"
            elif outcome != "failed":
                outcome = "error"
            if failure is None:
                failure = _pytest_failure(r)
        elif r.outcome == "skipped" and outcome == "passed":
            outcome = "xfailed" if xfail else "skipped"
            if not xfail and failure is None:
                failure = _pytest_skip(r)
        elif r.outcome == "passed" and xfail and r.when == "call":
            outcome = "xpassed"
        for name, text in getattr(r, "sections", []):
            # ("Captured stdout call", "..."): the last phase's text wins per stream.
            output[name] = text
    record = {"id": nodeid, "outcome": outcome, "phases": phases}
    if failure is not None:
        record["failure"] = failure
    if output:
        record["output"] = dict((k, _tail(v)) for k, v in output.items())
    for sub in subtests:
        _add_subtest(record, sub)
    _subtests_verdict(record)
    _end(record, _pytest_state["params"].pop(nodeid, None))


def _pytest_failure(report):
    f = {"phase": report.when}
    lr = report.longrepr
    crash = getattr(lr, "reprcrash", None)
    if crash is not None:
        f["file"] = str(crash.path)
        f["line"] = crash.lineno
        f["message"] = _text(crash.message)
        first = crash.message.split("\n", 1)[0]
        head = first.split(":", 1)[0].strip()
        if head and " " not in head and (head[0].isupper() or "." in head):
            f["exception"] = head
    tb = getattr(lr, "reprtraceback", None)
    entries = getattr(tb, "reprentries", None) or []
    frames = []
    for e in entries[-_FRAMES:]:
        loc = getattr(e, "reprfileloc", None)
        if loc is not None:
            frame = {"file": str(loc.path), "line": loc.lineno, "message": _text(loc.message, 300)}
            function = _frame_function(getattr(report, "_slicetrace_names", ()), str(loc.path), loc.lineno)
            if function:
                frame["function"] = function
            frames.append(frame)
    if frames:
        f["frames"] = frames
        # Where it failed: the innermost frame pytest shows (its traceback leaves out the
        # runner's and unittest's own frames; the crash location may be inside them).
        f["file"] = frames[-1]["file"]
        f["line"] = frames[-1]["line"]
    if entries:
        # pytest's explanation lines of the innermost entry: the failing statement ("> ...",
        # with the lines that continue it: pytest prints the statement whole, its first line
        # marked), and the comparison ("E   ..."), as pytest prints them. The function's lines
        # above the statement are left out.
        lines = getattr(entries[-1], "lines", None) or []
        shown = _statement_and_error(lines)
        if shown:
            f["report"] = _text("\n".join(shown))
    if "message" not in f:
        f["message"] = _text(str(lr))
    return f


def _statement_and_error(lines):
    """Of a pytest traceback entry's lines: the failing statement from its marked line ("> ")
    to its end (the lines up to the first "E" line, at most _STATEMENT_LINES), and the "E"
    lines."""
    shown = []
    statement = 0
    for l in lines:
        if l.startswith(">"):
            shown.append(l)
            statement = 1
        elif l.startswith("E "):
            shown.append(l)
            statement = 0
        elif statement and statement < _STATEMENT_LINES:
            shown.append(l)
            statement += 1
    return shown


def _statement_lines(filename, lineno):
    """The source lines of the statement that starts at `lineno` of `filename`: that line and
    the lines that continue it (an open bracket, a backslash, a string over several lines), as
    Python's tokenizer reads them; at most _STATEMENT_LINES. Only the first line when the
    source cannot be read or the lines do not make a statement."""
    first = ""
    try:
        import linecache
        import tokenize

        first = linecache.getline(filename, lineno)
        if not first:
            return []
        lines = [first]
        n = [0]

        def readline():
            if n[0] >= _STATEMENT_LINES:
                return ""
            n[0] += 1
            if n[0] == 1:
                return first
            line = linecache.getline(filename, lineno + n[0] - 1)
            if line:
                lines.append(line)
            return line

        for tok in tokenize.generate_tokens(readline):
            if tok[0] in (tokenize.NEWLINE, tokenize.ENDMARKER):
                return [l.rstrip("\n") for l in lines[: tok[2][0]]]
        return [first.rstrip("\n")]
    except Exception:
        return [first.rstrip("\n")] if first else []


def _pytest_skip(report):
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return {"phase": report.when, "file": str(lr[0]), "line": lr[1], "message": _text(lr[2])}
    return None


def install_pytest(manager_class):
    """Register this module as a plugin of every pytest plugin manager (sitecustomize calls it
    when _pytest.config is imported): after the plugins named by PYTEST_PLUGINS, as pytest
    does for those, with no change to the user's environment or conftest.py."""
    orig = getattr(manager_class, "consider_env", None)
    if orig is None or getattr(orig, "_slicetrace", False):
        return
    try:
        import pluggy  # imported by _pytest.config already

        # Before pytest's own protocol, which answers for the test (firstresult).
        pluggy.HookimplMarker("pytest")(tryfirst=True)(pytest_runtest_protocol)
    except Exception:
        pass

    def consider_env(self, *args, **kwargs):
        result = orig(self, *args, **kwargs)
        try:
            if self.get_plugin("slicetrace-tests") is None:
                self.register(sys.modules[__name__], "slicetrace-tests")
        except Exception as e:
            sys.stderr.write("trace: cannot register the test recorder with pytest (%s); tests are not recorded\n" % e)
        return result

    consider_env._slicetrace = True
    consider_env.__name__ = orig.__name__
    consider_env.__qualname__ = getattr(orig, "__qualname__", orig.__name__)
    consider_env.__doc__ = orig.__doc__
    manager_class.consider_env = consider_env


# ---------------------------------------------------------------- unittest


def _unittest_id(test):
    try:
        return test.id()
    except Exception:
        return repr(test)


def _unittest_file(test):
    """The file the test method is defined in (None if unknown)."""
    try:
        import inspect

        m = getattr(test, getattr(test, "_testMethodName", ""), None)
        if m is not None:
            return inspect.getsourcefile(m)
    except Exception:
        pass
    return None


def _unittest_subtest(test):
    """unittest's _SubTest (what `self.subTest(...)` reports to the result): its test case."""
    case = getattr(test, "test_case", None)
    if case is not None and hasattr(test, "_subDescription"):
        return case
    return None


def _same_file(a, b):
    try:
        return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))
    except Exception:
        return False


def _unittest_failure(test, err, phase="call"):
    import traceback

    etype, value, tb = err
    kept = []
    for fs in traceback.extract_tb(tb)[-_FRAMES:]:
        if "/unittest/" in fs.filename.replace("\\", "/"):
            continue
        kept.append(fs)
    frames = [{"file": fs.filename, "line": fs.lineno, "message": fs.name} for fs in kept]
    f = {"phase": phase, "exception": getattr(etype, "__qualname__", str(etype)), "message": _text(value)}
    if frames:
        f["frames"] = frames
    # Where it failed, and the failing statement: the innermost frame in the test's own file
    # (the test method, or setUp), else the innermost frame kept; its source line as the
    # traceback read it. With the exception as unittest prints it, in pytest's layout: `>` the
    # statement, `E` the exception and its message.
    test_file = _unittest_file(test)
    stated = None
    for fs in reversed(kept):
        if test_file is not None and _same_file(fs.filename, test_file):
            stated = fs
            break
    if stated is None and kept:
        stated = kept[-1]
    if stated is not None:
        f["file"] = stated.filename
        f["line"] = stated.lineno
    report = []
    # The failing statement whole, as pytest prints it: its first line marked, the lines that
    # continue it below, indented as in the source past the first line's indentation.
    statement = _statement_lines(stated.filename, stated.lineno) if stated is not None else []
    if not statement and stated is not None and getattr(stated, "line", None):
        statement = [stated.line]
    if statement:
        indent = len(statement[0]) - len(statement[0].lstrip())
        report.append(">   " + statement[0].strip())
        for l in statement[1:]:
            cut = min(indent, len(l) - len(l.lstrip()))
            report.append(("    " + l[cut:]).rstrip())
    try:
        for chunk in traceback.format_exception_only(etype, value):
            for l in chunk.rstrip("\n").split("\n"):
                report.append(("E   " + l).rstrip())
    except Exception:
        pass
    if report:
        f["report"] = _text("\n".join(report))
    return f


def install_unittest(result_class):
    """Wrap unittest.TestResult's start/stop/add* methods (sitecustomize calls it when
    unittest.result is imported). Under pytest, pytest's own records win."""
    if getattr(result_class, "_slicetrace_wrapped", False):
        return
    result_class._slicetrace_wrapped = True
    current = {}

    def wrap(name, before=None):
        orig = getattr(result_class, name, None)
        if orig is None:
            return

        def method(self, *args, **kwargs):
            if before is not None:
                try:
                    before(self, *args)
                except Exception:
                    pass
            return orig(self, *args, **kwargs)

        method.__name__ = orig.__name__
        method.__qualname__ = getattr(orig, "__qualname__", orig.__name__)
        method.__doc__ = orig.__doc__
        setattr(result_class, name, method)

    def start(self, test):
        tid = _tid()
        opened = _state["open"].get(tid)
        if opened is not None and opened.get("runner") != "unittest":
            # A unittest result used inside a test that pytest runs is not a test of its own.
            return
        file, line = _unittest_file(test), None
        try:
            m = getattr(test, getattr(test, "_testMethodName", ""), None)
            if m is not None:
                line = m.__code__.co_firstlineno
        except Exception:
            pass
        current[tid] = {"id": _unittest_id(test), "outcome": "passed", "phases": []}
        _begin(current[tid]["id"], "unittest", file, line)

    def outcome(kind):
        def set_outcome(self, test, *rest):
            rec = current.get(_tid())
            if rec is None:
                return
            case = _unittest_subtest(test)
            if case is not None:
                # A subtest skipped (3.9-3.13 report it with the _SubTest).
                sub = {"id": _unittest_id(test), "outcome": kind}
                if kind == "skipped" and rest:
                    sub["failure"] = {"phase": "call", "message": _text(rest[0])}
                elif kind in ("failed", "error") and rest:
                    sub["failure"] = _unittest_failure(case, rest[0])
                _add_subtest(rec, sub)
                return
            if kind in ("failed", "error") and rest:
                rec["failure"] = _unittest_failure(test, rest[0])
            elif kind == "skipped" and rest:
                rec["failure"] = {"phase": "call", "message": _text(rest[0])}
            if kind == "error" and rec["outcome"] == "failed":
                return
            rec["outcome"] = kind

        return set_outcome

    def add_subtest(self, test, subtest, err=None):
        # Each subtest's outcome: a pass (err None; 3.11+ as the subtest ends, 3.9-3.10 all
        # at the test's end), a failure (the test's failureException) or an error.
        rec = current.get(_tid())
        if rec is None:
            return
        if err is None:
            kind = "passed"
        else:
            failure_exc = getattr(test, "failureException", AssertionError)
            kind = "failed" if isinstance(err[0], type) and issubclass(err[0], failure_exc) else "error"
        sub = {"id": _unittest_id(subtest), "outcome": kind}
        if err is not None:
            sub["failure"] = _unittest_failure(test, err)
        _add_subtest(rec, sub)

    def stop(self, test):
        rec = current.pop(_tid(), None)
        if rec is not None:
            _subtests_verdict(rec)
            _end(rec)

    wrap("startTest", start)
    wrap("addFailure", outcome("failed"))
    wrap("addError", outcome("error"))
    wrap("addSkip", outcome("skipped"))
    wrap("addExpectedFailure", outcome("xfailed"))
    wrap("addUnexpectedSuccess", outcome("xpassed"))
    wrap("addSubTest", add_subtest)
    wrap("stopTest", stop)
