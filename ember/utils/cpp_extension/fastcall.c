/* ember's fast path for calling a stable-ABI boxed kernel from Python (a CPython extension
 * module, built by the system compiler on first use like the shim; _fast.py loads it).
 *
 * It does what StableKernel.invoke does for the common call (tensor, int, float and bool
 * arguments; one tensor, one scalar or no result) without ctypes: it lends the arguments' arrays
 * to ember_stable_py_call (the shim's entry, reached through a function pointer), and wraps a
 * result in memory the shim allocated as a NumPy array whose base is a capsule that releases the
 * handle.  Any other call is handed to StableKernel.invoke unchanged, so both paths behave the
 * same.  A plan is (bytes Plan, StableKernel, qualname). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>

typedef int32_t (*PyCallFn)(const int64_t* head, uint64_t* stack, void* arrays, int64_t* meta,
                            int64_t* out);
typedef int32_t (*ReleaseFn)(void* handle);

/* ret: 0 none, 1 one tensor, 2 int, 3 float, 4 bool, -1 anything else (always invoke) */
typedef struct {
  int64_t head[6];
  int64_t nargs;
  int64_t ret;
  char kinds[64];
} Plan;

#define MAX_ARGS 64
static PyCallFn py_call;
static ReleaseFn release;
static PyObject* tensor_type;  /* ember.Tensor */
static PyObject* wrap;         /* ember.tensor._wrap(array, dtype) */
static PyObject* dtype_of;     /* tuple: stable scalar type code -> ember dtype (or None) */
static PyObject* np_dtypes;    /* tuple: stable scalar type code -> numpy dtype (or None) */
static PyObject* pinned;       /* list: argument memory a kernel kept a handle to */
static PyObject* raise_error;  /* raise_error(code, qualname) */
static PyObject *s_data, *s_requires_grad, *s_invoke;

static int code_of(PyArrayObject* a) {
  switch (PyArray_TYPE(a)) {
    case NPY_UINT8: return 0;
    case NPY_INT8: return 1;
    case NPY_INT16: return 2;
    case NPY_INT32: return PyArray_ITEMSIZE(a) == 4 ? 3 : -1;
    case NPY_LONG: case NPY_LONGLONG: return PyArray_ITEMSIZE(a) == 8 ? 4 : -1;
    case NPY_FLOAT16: return 5;
    case NPY_FLOAT32: return 6;
    case NPY_FLOAT64: return 7;
    case NPY_BOOL: return 11;
    default: return -1;  /* bfloat16 (a user dtype) and the rest: StableKernel.invoke */
  }
}

/* ember.ops._layout.storage_offset: elements from the storage root's first element */
static int64_t storage_offset(PyArrayObject* a) {
  PyArrayObject* root = a;
  while (PyArray_BASE(root) && PyArray_Check(PyArray_BASE(root)))
    root = (PyArrayObject*)PyArray_BASE(root);
  char* start = PyArray_BYTES(root);
  for (int d = 0; d < PyArray_NDIM(root); d++) {
    npy_intp s = PyArray_STRIDES(root)[d];
    if (s < 0) start += (PyArray_DIMS(root)[d] - 1) * s;
  }
  int64_t bytes = PyArray_BYTES(a) - start;
  int64_t item = PyArray_ITEMSIZE(a);
  return bytes >= 0 ? bytes / item : -((-bytes + item - 1) / item);  /* Python's // */
}

static void release_capsule(PyObject* cap) {
  void* h = PyCapsule_GetPointer(cap, "ember.stable.handle");
  PyObject* keep = (PyObject*)PyCapsule_GetContext(cap);
  if (h) release(h);
  Py_XDECREF(keep);
}

/* the array over a result handle's memory; keep: the argument array it lies over (or NULL) */
static PyObject* result_array(const int64_t* rec, PyObject* keep) {
  void* handle = (void*)rec[0];
  int64_t code = rec[3], nd = rec[4];
  PyObject* cap = PyCapsule_New(handle, "ember.stable.handle", release_capsule);
  if (!cap) {
    release(handle);
    return NULL;
  }
  if (keep) {
    Py_INCREF(keep);
    PyCapsule_SetContext(cap, keep);
  }
  PyObject* descr = PyTuple_GetItem(np_dtypes, code);  /* bfloat16 is ml_dtypes' */
  if (!descr || !PyArray_DescrCheck(descr)) {
    Py_DECREF(cap);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fastcall: unknown result dtype");
    return NULL;
  }
  Py_INCREF(descr);  /* PyArray_NewFromDescr steals it */
  npy_intp dims[64], strides[64];
  for (int64_t d = 0; d < nd; d++) {
    dims[d] = rec[7 + d];
    strides[d] = rec[7 + nd + d];
  }
  PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr*)descr, (int)nd, dims, strides,
                                       (void*)rec[1], NPY_ARRAY_WRITEABLE, NULL);
  if (!arr) {
    Py_DECREF(cap);
    return NULL;
  }
  if (PyArray_SetBaseObject((PyArrayObject*)arr, cap) < 0) {  /* steals cap */
    Py_DECREF(arr);
    return NULL;
  }
  return arr;
}

typedef enum { DONE, NOT_HANDLED, GRAD } Check;

/* every argument fits the fast path? (nothing is written; NOT_HANDLED: StableKernel.invoke;
 * GRAD: a tensor is not an exact ember.Tensor or requires grad, with check_grad set) */
static Check check_args(const Plan* p, PyObject* const* args, PyObject** arrays, int check_grad) {
  for (int64_t i = 0; i < p->nargs; i++) {
    PyObject* v = args[i];
    switch (p->kinds[i]) {
      case 'T': {
        if ((PyObject*)Py_TYPE(v) != tensor_type) return check_grad ? GRAD : NOT_HANDLED;
        if (check_grad) {
          PyObject* rg = PyObject_GetAttr(v, s_requires_grad);
          if (!rg) {
            PyErr_Clear();
            return GRAD;
          }
          int on = rg != Py_False;
          Py_DECREF(rg);
          if (on) return GRAD;
        }
        PyObject* a = PyObject_GetAttr(v, s_data);
        if (!a) {
          PyErr_Clear();
          return NOT_HANDLED;
        }
        Py_DECREF(a);  /* the tensor holds it; the caller holds the tensor */
        if (!PyArray_CheckExact(a) || code_of((PyArrayObject*)a) < 0) return NOT_HANDLED;
        arrays[i] = a;
        break;
      }
      case 'f':
        if (!PyFloat_Check(v) && !PyLong_Check(v)) return NOT_HANDLED;
        break;
      case 'i': case 'b':
        if (!PyLong_Check(v)) return NOT_HANDLED;
        break;
      default:
        return NOT_HANDLED;
    }
  }
  return DONE;
}

static PyObject* results(const Plan* p, const uint64_t* stack, const int64_t* out,
                         PyObject* arrays, PyObject* alias_error) {
  switch (p->ret) {
    case 0: Py_RETURN_NONE;
    case 2: return PyLong_FromLongLong((long long)stack[0]);
    case 3: {
      double d;
      memcpy(&d, &stack[0], sizeof d);
      return PyFloat_FromDouble(d);
    }
    case 4: return PyBool_FromLong(stack[0] != 0);
    default: break;
  }
  PyObject* keep = NULL;
  if (out[2] >= 0) {  /* the result lies over an argument's memory */
    if (alias_error != Py_None) {
      release((void*)out[0]);
      PyObject* r = PyObject_CallNoArgs(alias_error);
      Py_XDECREF(r);
      return r ? Py_NewRef(Py_None) : NULL;  /* alias_error raises */
    }
    keep = PyTuple_GET_ITEM(arrays, out[2]);
  }
  PyObject* dtype = PyTuple_GetItem(dtype_of, out[3]);
  if (!dtype) {
    release((void*)out[0]);
    return NULL;
  }
  PyObject* arr = result_array(out, keep);
  if (!arr) return NULL;
  PyObject* t = PyObject_CallFunctionObjArgs(wrap, arr, dtype, NULL);
  Py_DECREF(arr);
  return t;
}

/* marshal, call, unmarshal; the checks have passed */
static PyObject* run(const Plan* p, PyObject* qualname, PyObject* const* args,
                     PyObject** arrays_in, PyObject* alias_error) {
  uint64_t stack[MAX_ARGS + 1] = {0};
  int64_t meta[2 * MAX_ARGS];
  int64_t out[8 + 2 * 64];
  int64_t n = 0;
  for (int64_t i = 0; i < p->nargs; i++) {
    PyObject* v = args[i];
    if (p->kinds[i] == 'T') {
      PyArrayObject* a = (PyArrayObject*)arrays_in[i];
      int64_t offset = PyArray_BASE(a) ? storage_offset(a) : 0;
      meta[2 * n] = (int64_t)(uintptr_t)&stack[i];
      meta[2 * n + 1] = (int64_t)code_of(a) | (offset << 8);
      arrays_in[n++] = (PyObject*)a;
    } else if (p->kinds[i] == 'f') {
      double d = PyFloat_AsDouble(v);
      if (d == -1.0 && PyErr_Occurred()) return NULL;
      memcpy(&stack[i], &d, sizeof d);
    } else if (p->kinds[i] == 'i') {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) {  /* StableKernel.invoke masks big ints to 64 bits */
        PyObject* m = PyLong_FromUnsignedLongLong(0xFFFFFFFFFFFFFFFFull);
        PyObject* r = m ? PyNumber_And(v, m) : NULL;
        Py_XDECREF(m);
        if (!r) return NULL;
        stack[i] = PyLong_AsUnsignedLongLong(r);
        Py_DECREF(r);
      } else {
        stack[i] = (uint64_t)x;
      }
    } else {  /* 'b' */
      stack[i] = PyObject_IsTrue(v) ? 1 : 0;
    }
  }
  PyObject* arrays = PyTuple_New(n);
  if (!arrays) return NULL;
  for (int64_t k = 0; k < n; k++) PyTuple_SET_ITEM(arrays, k, Py_NewRef(arrays_in[k]));
  int32_t code = py_call(p->head, stack, arrays, meta, out);
  PyObject* ret = NULL;
  for (int64_t k = 0; k < n; k++) {
    if (meta[2 * k] > 0 && PyList_Append(pinned, PyTuple_GET_ITEM(arrays, k)) < 0) goto done;
  }
  if (code) {
    PyObject* r = PyObject_CallFunction(raise_error, "iO", (int)code, qualname);
    Py_XDECREF(r);
    if (r) PyErr_SetString(PyExc_RuntimeError, "raise_error returned");
    goto done;
  }
  ret = results(p, stack, out, arrays, alias_error);
done:
  Py_DECREF(arrays);
  return ret;
}

static const Plan* plan_of(PyObject* plan, PyObject** sk, PyObject** qualname) {
  if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 3) {
    PyErr_SetString(PyExc_TypeError, "fastcall: bad plan");
    return NULL;
  }
  PyObject* b = PyTuple_GET_ITEM(plan, 0);
  if (!PyBytes_CheckExact(b) || PyBytes_GET_SIZE(b) != (Py_ssize_t)sizeof(Plan)) {
    PyErr_SetString(PyExc_TypeError, "fastcall: bad plan");
    return NULL;
  }
  *sk = PyTuple_GET_ITEM(plan, 1);
  *qualname = PyTuple_GET_ITEM(plan, 2);
  return (const Plan*)PyBytes_AS_STRING(b);
}

static PyObject* slow(PyObject* sk, PyObject* const* args, Py_ssize_t nargs,
                      PyObject* alias_error) {
  PyObject* tup = PyTuple_New(nargs);
  if (!tup) return NULL;
  for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
  PyObject* r = PyObject_CallMethodObjArgs(sk, s_invoke, tup, alias_error, NULL);
  Py_DECREF(tup);
  return r;
}

/* call(plan, *args): the extension module's function (StableKernel.__call__) */
static PyObject* fc_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject *sk, *qualname;
  if (nargs < 1) return PyErr_Format(PyExc_TypeError, "fastcall.call: no plan");
  const Plan* p = plan_of(args[0], &sk, &qualname);
  if (!p) return NULL;
  PyObject* arrays[MAX_ARGS];
  if (p->ret < 0 || nargs - 1 != p->nargs ||
      check_args(p, args + 1, arrays, 0) != DONE)
    return slow(sk, args + 1, nargs - 1, Py_None);
  return run(p, qualname, args + 1, arrays, Py_None);
}

/* call_op(plan, alias_error, *args): CustomOpDef's eager fast path.  NotImplemented when the
 * call needs the general path (argument count, a tensor that requires grad or is a subclass) */
static PyObject* fc_call_op(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject *sk, *qualname;
  if (nargs < 2) return PyErr_Format(PyExc_TypeError, "fastcall.call_op: no plan");
  const Plan* p = plan_of(args[0], &sk, &qualname);
  if (!p) return NULL;
  if (nargs - 2 != p->nargs) Py_RETURN_NOTIMPLEMENTED;
  PyObject* arrays[MAX_ARGS];
  Check c = check_args(p, args + 2, arrays, 1);
  if (c == GRAD) Py_RETURN_NOTIMPLEMENTED;
  if (c == NOT_HANDLED || p->ret < 0) {
    /* the general rule of CustomOpDef._call_fast: every Tensor argument is an exact Tensor
     * not requiring grad (checked so far only up to the first argument not handled here) */
    for (int64_t i = 0; i < p->nargs; i++) {
      if (p->kinds[i] != 'T') continue;
      PyObject* v = args[2 + i];
      if ((PyObject*)Py_TYPE(v) != tensor_type) Py_RETURN_NOTIMPLEMENTED;
      PyObject* rg = PyObject_GetAttr(v, s_requires_grad);
      if (!rg) return NULL;
      int on = rg != Py_False;
      Py_DECREF(rg);
      if (on) Py_RETURN_NOTIMPLEMENTED;
    }
    return slow(sk, args + 2, nargs - 2, args[1]);
  }
  return run(p, qualname, args + 2, arrays, args[1]);
}

/* init(py_call, release, Tensor, _wrap, dtype_of, np_dtypes, pinned, raise_error) */
static PyObject* fc_init(PyObject* self, PyObject* a) {
  unsigned long long call_addr, release_addr;
  PyObject *t, *w, *d, *n, *p, *r;
  if (!PyArg_ParseTuple(a, "KKOOO!O!O!O", &call_addr, &release_addr, &t, &w, &PyTuple_Type, &d,
                        &PyTuple_Type, &n, &PyList_Type, &p, &r))
    return NULL;
  py_call = (PyCallFn)(uintptr_t)call_addr;
  release = (ReleaseFn)(uintptr_t)release_addr;
  Py_XSETREF(tensor_type, Py_NewRef(t));
  Py_XSETREF(wrap, Py_NewRef(w));
  Py_XSETREF(dtype_of, Py_NewRef(d));
  Py_XSETREF(np_dtypes, Py_NewRef(n));
  Py_XSETREF(pinned, Py_NewRef(p));
  Py_XSETREF(raise_error, Py_NewRef(r));
  Py_RETURN_NONE;
}

static PyObject* fc_plan_size(PyObject* self, PyObject* unused) {
  return PyLong_FromSize_t(sizeof(Plan));
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))fc_call, METH_FASTCALL, "call(plan, *args)"},
    {"call_op", (PyCFunction)(void (*)(void))fc_call_op, METH_FASTCALL,
     "call_op(plan, alias_error, *args)"},
    {"init", fc_init, METH_VARARGS, "init(py_call, release, Tensor, wrap, dtype_of, np_dtypes, "
     "pinned, raise_error)"},
    {"plan_size", fc_plan_size, METH_NOARGS, "sizeof(Plan)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ember_stable_fastcall", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__ember_stable_fastcall(void) {
  import_array();
  s_data = PyUnicode_InternFromString("_data");
  s_requires_grad = PyUnicode_InternFromString("_requires_grad");
  s_invoke = PyUnicode_InternFromString("invoke");
  if (!s_data || !s_requires_grad || !s_invoke) return NULL;
  return PyModule_Create(&module);
}
