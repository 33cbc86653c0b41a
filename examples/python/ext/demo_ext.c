/* A small CPython extension module for `trace run --native-ext` (tests/python_native_ext.rs).
 * Built by the test: gcc -g -O0 -shared -fPIC -I<CPython include> demo_ext.c
 *   -o demo_ext$(python3-config --extension-suffix) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The weight of the i-th item: a static helper, called by weighted_sum only. */
static long item_weight(long i, long value) {
    return (i % 3 + 1) * value;
}

/* weighted_sum(values): the sum of each value times its weight. */
static PyObject *weighted_sum(PyObject *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) {
        return NULL;
    }
    PyObject *fast = PySequence_Fast(seq, "weighted_sum expects a sequence");
    if (fast == NULL) {
        return NULL;
    }
    long total = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        total += item_weight((long)i, v);
    }
    Py_DECREF(fast);
    return PyLong_FromLong(total);
}

/* apply(fn, values): calls back fn(weight) for each value's weight, in order; the sum of
 * what it returns. */
static PyObject *apply(PyObject *self, PyObject *args) {
    PyObject *fn, *seq;
    if (!PyArg_ParseTuple(args, "OO", &fn, &seq)) {
        return NULL;
    }
    PyObject *fast = PySequence_Fast(seq, "apply expects a sequence");
    if (fast == NULL) {
        return NULL;
    }
    long total = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        PyObject *r = PyObject_CallFunction(fn, "l", item_weight((long)i, v));
        if (r == NULL) {
            Py_DECREF(fast);
            return NULL;
        }
        total += PyLong_AsLong(r);
        Py_DECREF(r);
    }
    Py_DECREF(fast);
    return PyLong_FromLong(total);
}

/* both(first, second): calls first() and then second(), and returns what second returned;
 * if first raises, the exception, without calling second. */
static PyObject *both(PyObject *self, PyObject *args) {
    PyObject *first, *second;
    if (!PyArg_ParseTuple(args, "OO", &first, &second)) {
        return NULL;
    }
    PyObject *r = PyObject_CallNoArgs(first);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    r = PyObject_CallNoArgs(second);
    return r;
}

static PyMethodDef methods[] = {
    {"weighted_sum", weighted_sum, METH_VARARGS, "The weighted sum of a sequence of integers."},
    {"apply", apply, METH_VARARGS, "Calls a function back with each item's weight."},
    {"both", both, METH_VARARGS, "Calls two functions back, one after the other."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "demo_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_demo_ext(void) {
    return PyModule_Create(&module);
}
