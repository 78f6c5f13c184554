"""The GPU-only pieces that can be checked without a GPU: the Triton kernels compile ahead of time for
an H100 (sm_90) where Triton is importable (the copies vectorise to 128-bit accesses; the flag is an
atomic exchange and volatile loads), and what a profiler's names say about a copy."""

from __future__ import annotations

import re

import pytest

from t3.measure.backend import classify_copy


def test_profiler_names_tell_a_memcpy_from_a_kernel():
    assert "a Memcpy, no kernel" in classify_copy(["Memcpy DtoD (Device -> Device)"])
    assert "a Memcpy" in classify_copy(["Memcpy HtoD (Pinned -> Device)"])
    assert "not a copy engine" in classify_copy(
        ["Memcpy DtoD (Device -> Device)", "void at::native::copy_kernel"]
    )
    assert "not verified" in classify_copy([])


def test_the_triton_kernels_compile_for_sm90():
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import t3.measure.kernels as k

    target = GPUTarget("cuda", 90, 32)
    d16 = [["tt.divisibility", 16]]  # what the JIT assumes of torch's aligned buffers
    for fn, ptrs in ((k._copy_kernel, ("src", "dst")), (k._add_kernel, ("a", "b", "c"))):
        sig = {**dict.fromkeys(ptrs, "*fp32"), "n": "i32", "nprog": "i32", "BLOCK": "constexpr"}
        src = ASTSource(fn=fn, signature=sig, constexprs={"BLOCK": k.BLOCK},
                        attrs={(i,): d16 for i in range(len(ptrs) + 1)})  # fmt: skip
        ptx = triton.compile(src, target=target, options={"num_warps": k.THREADS // 32}).asm["ptx"]
        assert "ld.global.v4" in ptx and "st.global.v4" in ptx, fn.__name__
    sig = {
        "send": "*i32",
        "recv": "*i32",
        "status": "*i32",
        "rounds": "i32",
        "max_spin": "i32",
        "LEADER": "constexpr",
    }
    for leader in (0, 1):
        src = ASTSource(fn=k._pingpong_kernel, signature=sig, constexprs={"LEADER": leader})
        ptx = triton.compile(src, target=target, options={"num_warps": 1}).asm["ptx"]
        assert re.search(r"atom\.global\.gpu\.\w+\.exch", ptx) and "ld.volatile.global" in ptx
