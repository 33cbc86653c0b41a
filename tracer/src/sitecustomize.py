# Written by `trace run` into a private directory that it puts first on PYTHONPATH and
# removes after the run. It starts the recorder (_slicetrace, the Python shim) in every
# supported interpreter (one warning in any other, which runs unrecorded), takes its directory
# off sys.path again, then runs the user's own sitecustomize, if there is one.
# Kept valid in old Pythons (no f-strings): an unsupported interpreter must read it to warn.


def _slicetrace_boot():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    supported = "@PY_VERSION@"  # "3.9-3.15"
    low, high = [tuple(int(x) for x in v.split(".")) for v in supported.split("-")]
    impl = getattr(getattr(sys, "implementation", None), "name", "python")
    running = tuple(sys.version_info[:2])
    # Not sysconfig (it imports threading, functools, collections: ~10 ms before every program).
    free_threaded = "free-threading" in sys.version
    recorder = None
    if impl != "cpython" or not (low <= running <= high) or free_threaded:
        sys.stderr.write(
            "trace: %s (%s %d.%d%s) is not supported (supported: CPython %s to %s); "
            "running it without recording\n"
            % (sys.executable or "python", impl, running[0], running[1],
               ", free-threaded" if free_threaded else "", supported.split("-")[0], supported.split("-")[1])
        )
    elif os.environ.get("SLICE_TRACE_DIR"):
        try:
            import _slicetrace as recorder
        except ImportError as e:
            sys.stderr.write("trace: cannot load the recorder (%s); running without recording\n" % e)
    # Make sys.path look as it would without the tracer.
    sys.path[:] = [p for p in sys.path if p != here]
    sys.path_importer_cache.pop(here, None)
    if recorder is not None and recorder.start():
        os.register_at_fork(after_in_child=recorder.after_fork_child)
        _keep_children_recorded(here)
        if os.environ.get("SLICE_TRACE_TESTS", "1") != "0":
            _record_tests(here)
        import atexit
        atexit.register(_note_extensions, recorder)

    # Chain to the sitecustomize that would have run without us.
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


def _record_tests(here):
    # Tests are recorded as tests (slicetrace_tests.py beside this file): its module is loaded
    # now (it imports nothing), and reaches pytest and unittest only when the program imports
    # them, through a one-shot finder that adds a step after the module's own code.
    import os
    import sys
    import importlib.machinery
    import importlib.util

    path = os.path.join(here, "_slicetrace_tests.py")
    spec = importlib.util.spec_from_file_location("_slicetrace_tests", path)
    if spec is None or spec.loader is None:
        return
    tests = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(tests)
    except Exception as e:
        sys.stderr.write("trace: cannot load the test recorder (%s); tests are not recorded\n" % e)
        return
    sys.modules["_slicetrace_tests"] = tests
    after = {
        "_pytest.config": lambda m: tests.install_pytest(m.PytestPluginManager),
        "unittest.result": lambda m: tests.install_unittest(m.TestResult),
    }

    class AfterImport(object):
        def find_spec(self, name, path=None, target=None):
            step = after.pop(name, None)
            if step is None:
                return None
            if not after:
                try:
                    sys.meta_path.remove(self)
                except ValueError:
                    pass
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                try:
                    step(module)
                except Exception as e:
                    sys.stderr.write("trace: cannot record the tests of %s (%s)\n" % (name, e))

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterImport())


def _note_extensions(recorder):
    # At exit: the compiled extension modules the program imported from outside the standard
    # library (a mypyc- or Cython-compiled package runs as native code: none of its functions
    # is a Python function the recorder sees), into p<pid>/extensions.json, so that `slice` can
    # say which packages ran compiled. Bounded; replaced whole, by rename. It calls no Python
    # function (only builtins and C methods), so it adds nothing to the recorded calls.
    import os
    import sys
    import importlib.machinery

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    prefixes = (sys.base_prefix, sys.base_exec_prefix)
    escape = {92: "\\\\", 34: '\\"'}
    for i in range(32):
        escape[i] = "\\u%04x" % i
    lines = []
    for name, module in list(sys.modules.items()):
        # From the module's dict: `getattr` would run a module-level `__getattr__` (PEP 562).
        namespace = getattr(module, "__dict__", None)
        path = namespace.get("__file__") if isinstance(namespace, dict) else None
        if not isinstance(path, str) or not isinstance(name, str) or not path.endswith(suffixes):
            continue
        if not path.startswith("/"):
            path = os.getcwd() + "/" + path
        if path.startswith(prefixes) and "/lib-dynload/" in path:
            continue  # the standard library's own
        try:
            path.encode("utf-8")
            name.encode("utf-8")
        except UnicodeEncodeError:
            continue
        lines.append('{"module": "%s", "file": "%s"}' % (name.translate(escape), path.translate(escape)))
        if len(lines) >= 5000:
            break
    if not lines:
        return
    proc_dir = recorder.process_dir()
    if proc_dir is None:
        return
    proc_dir = os.fspath(proc_dir)
    tmp = proc_dir + "/extensions.json.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('{"modules": [\n' + ",\n".join(lines) + "\n]}\n")
        os.replace(tmp, proc_dir + "/extensions.json")
    except OSError:
        pass


def _keep_children_recorded(here):
    # A program that starts Python with an environment of its own making often leaves out
    # PYTHONPATH (venv's ensurepip, build isolation, tox): that child would run unrecorded, and
    # silently. An audit hook puts back, in the environment given to subprocess, os.exec* or
    # os.posix_spawn, what recording needs: this directory first on PYTHONPATH (the user's own
    # entries stay as the program left them) and where and how to record.
    import os
    import sys

    keep = dict((k, os.environ[k]) for k in ("SLICE_TRACE_DIR", "SLICE_TRACE_OPTIONS") if k in os.environ)
    sep = os.pathsep
    where = {"subprocess.Popen": 3, "os.exec": 2, "os.posix_spawn": 2}

    def hook(event, args):
        i = where.get(event)
        if i is None or len(args) <= i:
            return
        env = args[i]
        if not isinstance(env, dict):
            return
        bytes_keys = bool(env) and isinstance(next(iter(env)), bytes)
        enc = os.fsencode if bytes_keys else str
        for k, v in keep.items():
            if enc(k) not in env:
                env[enc(k)] = enc(v)
        path = env.get(enc("PYTHONPATH"))
        entries = path.split(enc(sep)) if path else []
        if enc(here) not in entries:
            env[enc("PYTHONPATH")] = enc(sep).join([enc(here)] + entries)

    sys.addaudithook(hook)


_slicetrace_boot()
del _slicetrace_boot
del _keep_children_recorded
del _record_tests
del _note_extensions
