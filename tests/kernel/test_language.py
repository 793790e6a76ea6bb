"""ember.kernel's builtins, in C and in the interpreter, against NumPy/torch closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.kernel as tl
from ember import Tensor
from ember.errors import EmberIndexError, EmberTypeError
from ember.kernel._front import KernelTypeError
from ember.library import triton_op, wrap_triton


@tl.jit
def rowwise(x_ptr, s_ptr, mx_ptr, mn_ptr, am_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    tl.store(s_ptr + row, tl.sum(x, axis=0))
    xm = tl.where(mask, x, -float("inf"))
    tl.store(mx_ptr + row, tl.max(xm, axis=0))
    tl.store(mn_ptr + row, tl.min(tl.where(mask, x, float("inf")), axis=0))
    tl.store(am_ptr + row, tl.argmax(xm, axis=0))


def test_row_reductions(mode):
    x = ember.randn(5, 37)
    s, mx, mn = ember.empty(5), ember.empty(5), ember.empty(5)
    am = ember.empty(5, dtype=ember.int64)
    rowwise[(5,)](x, s, mx, mn, am, 37, BLOCK=64)
    a = x.numpy()
    np.testing.assert_allclose(s.numpy(), a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx.numpy(), a.max(1))
    np.testing.assert_array_equal(mn.numpy(), a.min(1))
    np.testing.assert_array_equal(am.numpy(), a.argmax(1))


@tl.jit
def tile_ops(x_ptr, out0_ptr, out1_ptr, arg0_ptr, M, N,  # noqa: N803
             BM: tl.constexpr, BN: tl.constexpr):  # noqa: N803
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    tl.store(out0_ptr + rn, tl.sum(x, axis=0), mask=rn < N)
    tl.store(out1_ptr + rm, tl.max(tl.where(mask, x, -1e30), axis=1), mask=rm < M)
    tl.store(arg0_ptr + rn, tl.argmin(tl.where(mask, x, 1e30), axis=0), mask=rn < N)


def test_2d_blocks_and_axes(mode):
    x = ember.randn(6, 9)
    o0, o1 = ember.empty(9), ember.empty(6)
    a0 = ember.empty(9, dtype=ember.int64)
    tile_ops[(1,)](x, o0, o1, a0, 6, 9, BM=8, BN=16)
    a = x.numpy()
    np.testing.assert_allclose(o0.numpy(), a.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(o1.numpy(), a.max(1))
    np.testing.assert_array_equal(a0.numpy(), a.argmin(0))


@tl.jit
def math_kernel(x_ptr, out_ptr, n, KIND: tl.constexpr, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    if KIND == "exp":
        y = tl.exp(x)
    elif KIND == "log":
        y = tl.log(tl.abs(x) + 1.0)
    elif KIND == "sqrt":
        y = tl.sqrt(tl.abs(x))
    elif KIND == "sigmoid":
        y = tl.sigmoid(x)
    elif KIND == "tanh":
        y = tl.tanh(x)
    elif KIND == "rsqrt":
        y = tl.rsqrt(tl.abs(x) + 0.5)
    else:
        y = tl.maximum(x, 0.25) - tl.minimum(x, -0.25) + x // 0.5 + x * x / 3.0
    tl.store(out_ptr + offs, y, mask=mask)


@pytest.mark.parametrize("kind", ["exp", "log", "sqrt", "sigmoid", "tanh", "rsqrt", "arith"])
def test_math(mode, kind):
    torch = pytest.importorskip("torch")
    x = ember.randn(300)
    out = ember.empty(300)
    math_kernel[(tl.cdiv(300, 128),)](x, out, 300, KIND=kind, BLOCK=128)
    t = torch.from_numpy(x.numpy().copy())
    ref = {"exp": lambda: t.exp(), "log": lambda: (t.abs() + 1).log(),
           "sqrt": lambda: t.abs().sqrt(), "sigmoid": lambda: t.sigmoid(),
           "tanh": lambda: t.tanh(), "rsqrt": lambda: (t.abs() + 0.5).rsqrt(),
           "arith": lambda: t.clamp(min=0.25) - t.clamp(max=-0.25)
           + torch.floor_divide(t, 0.5) + t * t / 3.0}[kind]()
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=2e-6, atol=2e-6)


@tl.jit
def grid2d(out_ptr, BLOCK: tl.constexpr):  # noqa: N803
    x = tl.program_id(0)
    y = tl.program_id(1)
    v = tl.full((BLOCK,), 0, tl.int64) + x * 100 + y * 10 + tl.num_programs(0)
    tl.store(out_ptr + (y * tl.num_programs(0) + x) * BLOCK + tl.arange(0, BLOCK), v)


def test_2d_grid_num_programs_and_callable_grid(mode):
    out = ember.zeros(3 * 2 * 4, dtype=ember.int64)
    grid2d[lambda meta: (3, 2)](out, BLOCK=4)
    got = out.numpy().reshape(2, 3, 4)
    for y in range(2):
        for x in range(3):
            assert (got[y, x] == x * 100 + y * 10 + 3).all()


@tl.jit
def looped_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
    total = tl.sum(acc, axis=0)
    if total > 0:
        total = total * 2
    tl.store(out_ptr, total)


def test_loops_carried_values_and_float64(mode):
    x = ember.rand(1000, dtype=ember.float64)
    out = ember.empty(1, dtype=ember.float64)
    looped_sum[(1,)](x, out, 1000, BLOCK=64)
    np.testing.assert_allclose(out.numpy()[0], 2 * x.numpy().sum(), rtol=1e-12)


@tl.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)


def test_out_of_bounds_load_names_the_line():
    x = ember.randn(10)
    out = ember.empty(10)
    k = tl.jit(copy_kernel.fn, interpret=True)
    with pytest.raises(EmberIndexError, match=r"copy_kernel line \d+.*out-of-bounds load of "
                                              r"x_ptr: offset 10 is outside \[0, 10\)"):
        k[(1,)](x, out, 10, BLOCK=16)
    # the line named is the load's line of this file
    try:
        k[(1,)](x, out, 10, BLOCK=16)
    except EmberIndexError as e:
        line = int(str(e).split(" line ")[1].split()[0])
        import inspect
        src, first = inspect.getsourcelines(copy_kernel.fn)
        assert "tl.load(x_ptr + offs)" in src[line - first]


def _kernel_from(src: str):
    ns: dict = {"tl": tl}
    import linecache
    name = f"<kernel-test-{abs(hash(src))}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), ns)
    return ns["k"]


@pytest.mark.parametrize("body, message", [
    ("y = tl.load(x_ptr + 1.5)", "line 3: pointer arithmetic needs integer offsets"),
    ("acc = 0\n    for i in range(0, n):\n        acc = acc + tl.load(x_ptr + i)",
     "line 5: acc has type int64 scalar before this loop/branch but is re-assigned a float32"),
    ("a = tl.arange(0, 4)\n    b = tl.arange(0, 8)\n    c = a + b",
     "line 5: cannot broadcast blocks of shapes \\[4\\] and \\[8\\]"),
    ("y = tl.load(n)", "line 3: load needs a pointer"),
    ("y = tl.exp(x_ptr)", "line 3: exp takes values, not pointers"),
    ("y = undefined_name + 1", "line 3: name 'undefined_name' is not defined"),
    ("while n > 0:\n        pass", "line 3: While statements are not supported"),
])
def test_type_errors_name_the_kernel_line(body, message):
    k = _kernel_from(f"@tl.jit\ndef k(x_ptr, n):\n    {body}\n")
    x = ember.randn(8)
    k.interpret = False
    with pytest.raises(KernelTypeError, match=message):
        k[(1,)](x, 8)
    assert issubclass(KernelTypeError, EmberTypeError)


def test_bad_grid_and_arguments():
    x = ember.randn(8)
    with pytest.raises(ValueError, match="grid must be 1 to 3"):
        copy_kernel[(1, 1, 1, 1)](x, x, 8, BLOCK=8)
    with pytest.raises(TypeError, match="argument n is a str"):
        copy_kernel[(1,)](x, x, "8", BLOCK=8)


@tl.jit(interpret=False)
def masked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    p = out_ptr + offs
    tl.store(p, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_constexpr_specializations_are_cached():
    x = ember.randn(40)
    out = ember.empty(40)
    masked_copy[(1,)](x, out, 40, BLOCK=64)
    masked_copy[(1,)](x, out, 40, BLOCK=64)
    masked_copy[(1,)](x, out, 40, BLOCK=128)
    assert len(masked_copy._compiled) == 2
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    assert masked_copy.stored_params() == frozenset({"out_ptr"})


@tl.jit
def nan_max(x_ptr, out_ptr, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.max(tl.load(x_ptr + offs), axis=0))
    tl.store(out_ptr + 1, tl.min(tl.load(x_ptr + offs), axis=0))


def test_max_min_ignore_nan_in_both_modes(mode):
    x = ember.tensor([1.0, float("nan"), 3.0, -2.0])
    out = ember.empty(2)
    nan_max[(1,)](x, out, BLOCK=4)
    np.testing.assert_array_equal(out.numpy(), [3.0, -2.0])


@tl.jit
def read_then_overwrite(x_ptr, out_ptr, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    y = tl.load(x_ptr + offs) * 2.0          # used once, but after a store to x
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    t = acc + 1.0                             # used once, after acc changes in the loop
    tl.store(x_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32))
    for _ in range(3):
        acc += 1.0
    tl.store(out_ptr + offs, y + t + acc)


def test_values_keep_their_value_across_stores_and_loops(mode):
    x = ember.arange(8.0)
    out = ember.empty(8)
    read_then_overwrite[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out.numpy(), np.arange(8.0) * 2 + 1 + 3)
    np.testing.assert_array_equal(x.numpy(), np.zeros(8))


@tl.jit
def mixed_dtypes(h_ptr, i_ptr, out_h_ptr, out_i_ptr, out_f_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    m = offs < n
    h = tl.load(h_ptr + offs, mask=m, other=0.0)            # float16 computes in float32
    i = tl.load(i_ptr + offs, mask=m, other=0)              # int32
    tl.store(out_h_ptr + offs, h * 2.0 + 0.5, mask=m)       # rounded back to float16
    j = tl.where(i % 2 == 0, i // 2, -i)
    tl.store(out_i_ptr + offs, j, mask=m)
    f = i.to(tl.float32) / 3 + tl.sum(tl.where(m, h, 0.0), axis=0)
    for k in tl.static_range(2):
        if k == 1:
            f = f + 1.0
    tl.store(out_f_ptr + offs, f, mask=m)


def test_float16_int32_where_and_static_range(mode):
    h = ember.randn(20).to(ember.float16)
    i = ember.randint(-50, 50, (20,), dtype=ember.int32)
    oh, oi, of = ember.empty(20, dtype=ember.float16), ember.empty(20, dtype=ember.int32), \
        ember.empty(20)
    mixed_dtypes[(1,)](h, i, oh, oi, of, 20, BLOCK=32)
    hn, inp = h.numpy().astype(np.float32), i.numpy()
    np.testing.assert_array_equal(oh.numpy(), (hn * 2 + 0.5).astype(np.float16))
    np.testing.assert_array_equal(oi.numpy(), np.where(inp % 2 == 0, inp // 2, -inp))
    np.testing.assert_allclose(of.numpy(), inp / 3 + hn.sum() + 1, rtol=1e-5, atol=1e-5)


@tl.jit
def shapes_kernel(a_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr):  # noqa: N803
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    a = tl.load(a_ptr + rm[:, None] * BN + rn[None, :])           # (BM, BN)
    at = tl.trans(a)                                              # (BN, BM)
    p = tl.dot(a, at, acc=tl.full((BM, BM), 1.0, tl.float32))     # a @ a.T + 1
    r = tl.sum(p, axis=1, keep_dims=True)                         # (BM, 1)
    flat = tl.reshape(p / r, (BM * BM,))
    tl.store(out_ptr + tl.arange(0, BM * BM), flat)
    tl.store(out_ptr + BM * BM + rm, tl.argmax(p, axis=1))


def test_dot_trans_reshape_keep_dims(mode):
    a = ember.randn(4, 8)
    out = ember.empty(4 * 4 + 4)
    shapes_kernel[(1,)](a, out, BM=4, BN=8)
    an = a.numpy()
    p = an @ an.T + 1
    np.testing.assert_allclose(out.numpy()[:16], (p / p.sum(1, keepdims=True)).reshape(-1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.numpy()[16:], p.argmax(1).astype(np.float32))


@tl.jit
def matmul_ptr_increments(a_ptr, b_ptr, c_ptr, M, N, K,  # noqa: N803
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # noqa: N803
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]      # Triton's idiom: pointers advanced
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]      # in the loop
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kmask = rk < K - k * BK
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & kmask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kmask[:, None] & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_carried_pointer_blocks(mode):
    a, b = ember.randn(19, 23).to(ember.float16), ember.randn(23, 13).to(ember.float16)
    c = ember.empty(19, 13, dtype=ember.float16)
    matmul_ptr_increments[(tl.cdiv(19, 8), tl.cdiv(13, 8))](a, b, c, 19, 13, 23, BM=8, BN=8,
                                                            BK=8)
    ref = a.numpy().astype(np.float32) @ b.numpy().astype(np.float32)
    np.testing.assert_allclose(c.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-2)


@tl.jit
def store_past(x_ptr, out_ptr, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < 10, other=0.0) * 2)


def test_a_kernel_writing_past_its_output_is_stopped_in_the_interpreter():
    # the output is a view into a larger tensor: the store's 11th lane would write the next
    # element of the base; the interpreter refuses the whole store, naming the line, before
    # writing anything, so the neighbours keep their values
    base = ember.full((12,), 7.0)
    out = base[1:11]
    x = ember.randn(10)
    k = tl.jit(store_past.fn, interpret=True)
    with pytest.raises(EmberIndexError, match=r"store_past line \d+.*out-of-bounds store of "
                                              r"out_ptr: offset 10 is outside \[0, 10\)"):
        k[(1,)](x, out, BLOCK=16)
    np.testing.assert_array_equal(base.numpy(), np.full(12, 7.0, np.float32))
    # masked, the same kernel is fine: masked-off lanes are never touched
    k2 = tl.jit(masked_copy.fn, interpret=True)
    k2[(1,)](x, out, 10, BLOCK=16)
    np.testing.assert_array_equal(base.numpy()[[0, 11]], [7.0, 7.0])
    np.testing.assert_array_equal(out.numpy(), x.numpy())


def test_an_out_of_bounds_kernel_op_under_env_interpret(monkeypatch):
    # EMBER_KERNEL_INTERPRET=1 (config.kernel_interpret) runs kernel ops' launches in the
    # interpreter: the bad access raises from the op call with the kernel's line
    from ember.config import config

    @triton_op("kernel_lang_tests::bad_copy", mutates_args=())
    def bad_copy(x: Tensor) -> Tensor:
        out = ember.empty_like(x)
        wrap_triton(copy_kernel)[(1,)](x, out, x.numel(), BLOCK=16)
        return out

    monkeypatch.setattr(config, "kernel_interpret", True)
    with pytest.raises(EmberIndexError, match=r"copy_kernel line \d+.*out-of-bounds load"):
        bad_copy(ember.randn(10))


@tl.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


@pytest.mark.parametrize("threads", [1, 2])
def test_grid_serial_and_threaded(threads):
    # small grids run on the calling thread without entering OpenMP; one past the threshold
    # (32768 elements of work) splits over the threads: every program runs once either way
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for n in (100, 70001):
            x, y, out = ember.randn(n), ember.randn(n), ember.full((n,), 7.0)
            scaled_add[(tl.cdiv(n, 256),)](x, y, out, n, 1.5, BLOCK=256)
            np.testing.assert_allclose(out.numpy(), 1.5 * x.numpy() + y.numpy(), rtol=1e-6,
                                       atol=1e-6)
    finally:
        ember.set_num_threads(saved)
