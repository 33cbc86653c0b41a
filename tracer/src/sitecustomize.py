# Written by `trace run` into a private directory that it puts first on PYTHONPATH and
# removes after the run. It starts the recorder (_slicetrace, the Python shim), takes its
# directory off sys.path again, then runs the user's own sitecustomize, if there is one.


def _slicetrace_boot():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    built_for = "@PY_VERSION@"
    running = "%d.%d" % sys.version_info[:2]
    recorder = None
    if sys.implementation.name != "cpython" or running != built_for:
        sys.stderr.write(
            "trace: %s %s is not supported (the recorder was built for CPython %s); "
            "running %s without recording\n"
            % (sys.implementation.name, running, built_for, sys.executable or "python")
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

    # Chain to the sitecustomize that would have run without us.
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_slicetrace_boot()
del _slicetrace_boot
