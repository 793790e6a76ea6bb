"""OpInfo entries for the image layers of ``nn.functional``: interpolate (every mode, size and
scale_factor, align_corners, recompute_scale_factor), pixel_shuffle / pixel_unshuffle,
unfold / fold."""

from __future__ import annotations

import numpy as np

from tests.opinfo.core import FLOATS, ErrorCase, OpInfo, Sample, make
from tests.opinfo.ops_nn_conv import gradgrad

F32 = np.float32
_SPATIAL = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _f(name):
    return lambda lib, *a, **k: getattr(lib.nn.functional, name)(*a, **k)


def _interp_samples(mode):
    def samples(dtype, rng):
        dims = [_SPATIAL[mode]] if mode in _SPATIAL else [1, 2, 3]
        corners = [None] if mode.startswith("nearest") else [False, True]
        for nd in dims:
            x = make((2, 3) + (5, 4, 3)[:nd], dtype, rng)
            for ac in corners:
                kw = {"mode": mode, "align_corners": ac}
                tag = f"{nd}d ac={ac}"
                yield Sample((x,), {"scale_factor": 2, **kw}, desc=f"{tag} x2")
                yield Sample((x,), {"scale_factor": 1.7, **kw}, desc=f"{tag} x1.7")
                yield Sample((x,), {"scale_factor": 0.6, **kw}, desc=f"{tag} x0.6")
                yield Sample((x,), {"scale_factor": 1.7, "recompute_scale_factor": True, **kw},
                             desc=f"{tag} x1.7 recompute")
                yield Sample((x,), {"size": (7, 2, 4)[:nd], **kw}, desc=f"{tag} size")
                yield Sample((x,), {"size": 1, **kw}, desc=f"{tag} size 1")
        small = make((1, 2) + (3, 4, 2)[:dims[-1]], dtype, rng)  # small enough for gradcheck
        yield Sample((small,), {"scale_factor": 1.5, "mode": mode,
                                "align_corners": None if mode.startswith("nearest") else True},
                     desc="small x1.5")
        x = make((2, 3) + (5, 4, 3)[:dims[0]], dtype, rng, noncontig=True)
        yield Sample((x,), {"scale_factor": 3, "mode": mode}, desc="non-contiguous x3")
        yield Sample((make((0, 2) + (3, 3, 3)[:dims[0]], dtype, rng),),
                     {"scale_factor": 2, "mode": mode}, desc="empty batch")
    return samples


def _interp_errors():
    z = np.zeros
    x3, x4 = z((1, 2, 3), F32), z((1, 2, 3, 3), F32)
    return [
        ErrorCase((x3,), {"size": 4, "scale_factor": 2.0}, exc=ValueError,
                  match=r"\[interpolate\] only one of size or scale_factor should be defined"),
        ErrorCase((x3,), {}, exc=ValueError, match=r"either size or scale_factor"),
        ErrorCase((x3,), {"size": (4, 4)}, exc=ValueError,
                  match=r"Input and output must have the same number of spatial dimensions"),
        ErrorCase((x3,), {"scale_factor": (2.0, 2.0)}, exc=ValueError,
                  match=r"Input and scale_factor must have the same number of spatial"),
        ErrorCase((x3,), {"size": 4, "align_corners": True}, exc=ValueError,
                  match=r"align_corners option can only be set with the interpolating modes"),
        ErrorCase((x3,), {"size": 4, "recompute_scale_factor": True}, exc=ValueError,
                  match=r"recompute_scale_factor is not meaningful with an explicit size"),
        ErrorCase((x3,), {"size": 0}, exc=RuntimeError,
                  match=r"\[interpolate\] Input and output sizes should be greater than 0, but "
                        r"got input \(W: 3\) and output \(W: 0\)"),
        ErrorCase((x4,), {"scale_factor": -1.0, "mode": "bilinear"}, exc=RuntimeError,
                  match=r"input \(H: 3, W: 3\) output \(H: -3, W: -3\)"),
        ErrorCase((x3,), {"size": 4, "mode": "bilinear"}, exc=NotImplementedError,
                  match=r"\[interpolate\] Got 3D input, but bilinear mode needs 4D input"),
        ErrorCase((x4,), {"size": 4, "mode": "trilinear"}, exc=NotImplementedError,
                  match=r"Got 4D input, but trilinear mode needs 5D input"),
        ErrorCase((x3,), {"size": 4, "mode": "bicubic"}, exc=NotImplementedError,
                  match=r"Only 3D, 4D and 5D input Tensors supported \(got 3D\).*\(got bicubic\)"),
        ErrorCase((z((2, 3), F32),), {"size": 4}, exc=NotImplementedError,
                  match=r"Only 3D, 4D and 5D input Tensors supported \(got 2D\)"),
        ErrorCase((x3,), {"size": 4, "mode": "bogus"}, exc=NotImplementedError,
                  match=r"\(got bogus\)"),
        ErrorCase((x3,), {"size": 4, "mode": "linear", "antialias": True}, exc=ValueError,
                  match=r"Anti-alias option is restricted to bilinear, bicubic"),
        ErrorCase((z((1, 2, 3), np.int32),), {"size": 4, "mode": "linear"},
                  exc=NotImplementedError,
                  match=r"\"compute_indices_weights_linear\" not implemented for 'Int'"),
        ErrorCase((x3,), {"size": 4.5}, exc=TypeError, match=r"expected size to be one of int"),
        ErrorCase((z((1, 2, 3, 3), np.uint8),), {"size": 4, "mode": "bilinear"},
                  exc=NotImplementedError, match=r"\[interpolate\] mode 'bilinear' of uint8"),
    ]


def _shuffle_samples(dtype, rng):
    yield Sample((make((2, 8, 3, 2), dtype, rng), 2), desc="4-d r=2")
    yield Sample((make((9, 2, 3), dtype, rng), 3), desc="unbatched r=3")
    yield Sample((make((2, 1, 4, 2, 2), dtype, rng), 2), desc="5-d")
    yield Sample((make((1, 3, 2, 2), dtype, rng), 1), desc="r=1")


def _unshuffle_samples(dtype, rng):
    yield Sample((make((2, 2, 4, 6), dtype, rng), 2), desc="4-d r=2")
    yield Sample((make((1, 6, 9), dtype, rng), 3), desc="unbatched r=3")
    yield Sample((make((2, 1, 2, 4, 2), dtype, rng, noncontig=True), 2), desc="non-contiguous")


def _shuffle_errors(name):
    def cases():
        z = np.zeros
        what = "upscale_factor" if name == "pixel_shuffle" else "downscale_factor"
        out = [ErrorCase((z((4, 4), F32), 2), exc=RuntimeError,
                         match=rf"\[{name}\] {name} expects input to have at least 3 dimensions"),
               ErrorCase((z((4, 4, 4), F32), 0), exc=RuntimeError,
                         match=rf"{name} expects a positive {what}, but got 0")]
        if name == "pixel_shuffle":
            out.append(ErrorCase((z((5, 4, 4), F32), 2), exc=RuntimeError,
                                 match=r"input.size\(-3\)=5 is not divisible by 4"))
        else:
            out.append(ErrorCase((z((4, 5, 4), F32), 2), exc=RuntimeError,
                                 match=r"expects height to be divisible by downscale_factor, "
                                       r"but input.size\(-2\)=5 is not divisible by 2"))
        return out
    return cases


_FOLD_KW = [({"kernel_size": 2}, "k2"), ({"kernel_size": (2, 3), "stride": 2}, "k2x3 s2"),
            ({"kernel_size": 3, "padding": 1}, "k3 p1"),
            ({"kernel_size": (3, 2), "dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)},
             "dilated padded strided")]


def _blocks(kw, h=7, w=6):
    k = kw["kernel_size"]
    k = k if isinstance(k, tuple) else (k, k)
    d, p, s = (kw.get(n, v) for n, v in (("dilation", 1), ("padding", 0), ("stride", 1)))
    d, p, s = ((v, v) if isinstance(v, int) else v for v in (d, p, s))
    out = [(n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
           for n, kk, dd, pp, ss in zip((h, w), k, d, p, s)]
    return k[0] * k[1], out[0] * out[1]


def _unfold_samples(dtype, rng):
    for kw, desc in _FOLD_KW:
        yield Sample((make((2, 3, 7, 6), dtype, rng),), kw, desc=desc)
    yield Sample((make((3, 7, 6), dtype, rng),), {"kernel_size": 2}, desc="unbatched")
    yield Sample((make((1, 2, 4, 3), dtype, rng),), {"kernel_size": 2, "padding": 1},
                 desc="small padded")
    yield Sample((make((2, 2, 5, 4), dtype, rng, noncontig=True), 2), desc="non-contiguous")


def _fold_samples(dtype, rng):
    for kw, desc in _FOLD_KW:
        kk, nl = _blocks(kw)
        yield Sample((make((2, 3 * kk, nl), dtype, rng), (7, 6)), kw, desc=desc)
    kk, nl = _blocks({"kernel_size": 2})
    yield Sample((make((2 * kk, nl), dtype, rng), (7, 6), 2), desc="unbatched")
    yield Sample((make((1, 8, 4), dtype, rng), (3, 3), 2), desc="small")


def _fold_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 7, 6), F32), (3, 4), 2), exc=RuntimeError,
                  match=r"\[fold\] Expected size of input's dimension 1 to be divisible by the "
                        r"product of kernel_size, but got input.size\(1\)=7"),
        ErrorCase((z((1, 8, 5), F32), (3, 4), 2), exc=RuntimeError,
                  match=r"calculated number of sliding blocks 2 \* 3 = 6, but got "
                        r"input.size\(2\)=5"),
        ErrorCase((z((2, 1, 8, 6), F32), (3, 4), 2), exc=RuntimeError,
                  match=r"Expected 2D or 3D \(batch mode\) tensor"),
    ]


def _unfold_errors():
    z = np.zeros
    return [
        ErrorCase((z((1, 2, 3, 4), F32), 5), exc=RuntimeError,
                  match=r"\[unfold\] Given input with spatial size \(3, 4\), kernel_size=\(5, 5\)"
                        r".*calculated shape of the array of sliding blocks as \(-1, 0\)"),
        ErrorCase((z((1, 2, 3, 4), F32), 2), {"stride": 0}, exc=RuntimeError,
                  match=r"stride should be greater than zero, but got stride_height: 0 "
                        r"stride_width: 0"),
        ErrorCase((z((3, 4), F32), 2), exc=IndexError, match=r"\[unfold\]"),
    ]


def _interp(mode):
    return lambda lib, x, **k: lib.nn.functional.interpolate(x, **k)


OPINFOS = [
    OpInfo(f"nn.interpolate_{m.replace('-', '_')}", _interp(m), _interp_samples(m),
           dtypes=FLOATS + (("uint8",) if m.startswith("nearest") else ()),
           errors=_interp_errors if m == "nearest" else (lambda: ()),
           tols={"bfloat16": (2e-2, 2e-2), "float16": (2e-3, 2e-3)})
    for m in ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear")
] + [
    OpInfo("nn.interpolate_bilinear_double_backward", gradgrad("interpolate"),
           lambda d, r: [Sample((make((1, 2, 3, 4), d, r),),
                                {"scale_factor": 1.5, "mode": "bilinear"})],
           dtypes=("float64",)),
    OpInfo("nn.pixel_shuffle", _f("pixel_shuffle"), _shuffle_samples, dtypes=FLOATS,
           errors=_shuffle_errors("pixel_shuffle")),
    OpInfo("nn.pixel_unshuffle", _f("pixel_unshuffle"), _unshuffle_samples, dtypes=FLOATS,
           errors=_shuffle_errors("pixel_unshuffle")),
    OpInfo("nn.unfold", _f("unfold"), _unfold_samples, errors=_unfold_errors),
    OpInfo("nn.fold", _f("fold"), _fold_samples, errors=_fold_errors),
]


# ---------------------------------------------------------------------------- grid sampling
def _grid_sample_samples(dtype, rng):
    for mode in ("bilinear", "nearest", "bicubic"):
        for pm in ("zeros", "border", "reflection"):
            for ac in (False, True):
                yield Sample((make((1, 2, 3, 4), dtype, rng),
                              make((1, 3, 2, 2), dtype, rng, low=-1.4, high=1.4)),
                             {"mode": mode, "padding_mode": pm, "align_corners": ac},
                             desc=f"{mode} {pm} ac={ac}")
    yield Sample((make((2, 3, 5, 4), dtype, rng, noncontig=True),
                  make((2, 4, 3, 2), dtype, rng, low=-1.1, high=1.1)),
                 {"align_corners": False}, desc="batch 2 non-contiguous")
    for mode in ("bilinear", "nearest"):
        for pm in ("zeros", "border", "reflection"):
            yield Sample((make((1, 2, 2, 3, 2), dtype, rng),
                          make((1, 2, 1, 2, 3), dtype, rng, low=-1.3, high=1.3)),
                         {"mode": mode, "padding_mode": pm, "align_corners": pm == "border"},
                         desc=f"5-d {mode} {pm}")


def _affine_grid_samples(dtype, rng):
    for ac in (False, True):
        yield Sample((make((2, 2, 3), dtype, rng), (2, 3, 4, 5)), {"align_corners": ac},
                     desc=f"2-d ac={ac}")
        yield Sample((make((1, 3, 4), dtype, rng), (1, 2, 2, 3, 2)), {"align_corners": ac},
                     desc=f"3-d ac={ac}")


def _grid_errors():
    z = np.zeros
    x, g = z((1, 2, 3, 4), F32), z((1, 3, 2, 2), F32)
    return [
        ErrorCase((x, g), {"mode": "bogus", "align_corners": False}, exc=ValueError,
                  match=r"\[grid_sample\] .*expected mode to be 'bilinear', 'nearest' or "
                        r"'bicubic', but got: 'bogus'"),
        ErrorCase((x, g), {"padding_mode": "wrap", "align_corners": False}, exc=ValueError,
                  match=r"expected padding_mode to be 'zeros', 'border', or 'reflection'"),
        ErrorCase((x, z((1, 3, 2, 3), F32)), {"align_corners": False}, exc=RuntimeError,
                  match=r"expected grid to have size 2 in last dimension"),
        ErrorCase((x, z((2, 3, 2, 2), F32)), {"align_corners": False}, exc=RuntimeError,
                  match=r"expected grid and input to have same batch size"),
        ErrorCase((z((1, 1, 2, 2, 2), F32), z((1, 1, 1, 1, 3), F32)),
                  {"mode": "bicubic", "align_corners": False}, exc=RuntimeError,
                  match=r"bicubic interpolation only supports 4D input"),
        ErrorCase((x, z((1, 3, 2), F32)), {"align_corners": False}, exc=RuntimeError,
                  match=r"expected 4D or 5D input and grid with same number of dimensions"),
    ]


def _affine_errors():
    z = np.zeros
    return [
        ErrorCase((z((2, 3, 3), F32), (2, 3, 4, 5)), {"align_corners": False}, exc=ValueError,
                  match=r"\[affine_grid\] Expected a batch of 2D affine matrices of shape Nx2x3"),
        ErrorCase((z((2, 2, 3), F32), (2, 3, 4)), {"align_corners": False},
                  exc=NotImplementedError,
                  match=r"affine_grid only supports 4D and 5D sizes"),
        ErrorCase((z((2, 2, 3), F32), (2, 3, 0, 5)), {"align_corners": False}, exc=ValueError,
                  match=r"Expected non-zero, positive output size"),
        ErrorCase((z((2, 2, 3), np.int64), (2, 3, 4, 5)), {"align_corners": False},
                  exc=ValueError, match=r"Expected theta to have floating point type"),
    ]


def _antialias_samples(mode):
    def samples(dtype, rng):
        x = make((2, 3, 9, 7), dtype, rng)
        for ac in (False, True):
            for kw, desc in (({"scale_factor": 0.5}, "x0.5"), ({"size": (4, 3)}, "size"),
                             ({"scale_factor": 0.3}, "x0.3"), ({"scale_factor": 1.6}, "x1.6")):
                yield Sample((x,), {"mode": mode, "align_corners": ac, "antialias": True, **kw},
                             desc=f"ac={ac} {desc}")
        yield Sample((make((1, 2, 5, 6), dtype, rng),),
                     {"mode": mode, "size": (3, 2), "antialias": True}, desc="small")
    return samples


def _area_samples(dtype, rng):
    yield Sample((make((2, 3, 5), dtype, rng),), {"size": 3, "mode": "area"}, desc="3-d")
    yield Sample((make((2, 3, 5, 4), dtype, rng),), {"scale_factor": 0.5, "mode": "area"},
                 desc="4-d")
    x = make((2, 2, 5, 4, 6), dtype, rng)
    yield Sample((x,), {"size": (2, 3, 2), "mode": "area"}, desc="5-d down")
    yield Sample((x,), {"scale_factor": (0.7, 1.5, 0.4), "mode": "area"}, desc="5-d mixed")
    yield Sample((make((1, 1, 3, 2, 4), dtype, rng),), {"size": (2, 3, 3), "mode": "area"},
                 desc="5-d small")


OPINFOS += [
    # float16/bfloat16: PyTorch's adaptive_avg_pool3d rounds differently (a few ulps)
    OpInfo("nn.interpolate_area", _interp("area"), _area_samples, dtypes=FLOATS,
           tols={"bfloat16": (2e-2, 2e-2), "float16": (2e-3, 2e-3)}),
]
OPINFOS += [
    OpInfo(f"nn.interpolate_{m}_antialias", _interp(m), _antialias_samples(m),
           dtypes=("float32", "float64"))
    for m in ("bilinear", "bicubic")
]
OPINFOS += [
    OpInfo("nn.grid_sample", _f("grid_sample"), _grid_sample_samples, errors=_grid_errors),
    OpInfo("nn.affine_grid", _f("affine_grid"), _affine_grid_samples, errors=_affine_errors),
]
