"""deep_gemm.utils laid out as DeepGEMM's package: `math`, `layout`, `dist`, and the names each module exports.

Written from DeepGEMM's `deep_gemm/utils/` and from the import lines of SGLang, vLLM and DeepGEMM's own tests
(`from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor`, `from deep_gemm.utils.math import ...`).
"""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import deep_gemm
import deep_gemm.utils as utils
from deep_gemm.testing import assert_bitwise_equal

ROOT = Path(__file__).resolve().parent.parent

# DeepGEMM's deep_gemm/utils/math.py public functions and their parameters (defaults included).
MATH_SIGNATURES = {
    "ceil_div": "(x: int, y: int) -> int",
    "align": "(x: int, y: int) -> int",
    "ceil_to_ue8m0": "(x)",
    "pack_ue8m0_to_int": "(x)",
    "unpack_ue8m0_from_int": "(packed_sf)",
    "per_token_cast_to_fp8": "(x, use_ue8m0, gran_k=128, use_packed_ue8m0=False)",
    "per_channel_cast_to_fp8": "(x, use_ue8m0, gran_k=128)",
    "per_block_cast_to_fp8": "(x, use_ue8m0, gran_k=128)",
    "per_custom_dims_cast_to_fp8": "(x, dims, use_ue8m0)",
    "per_token_cast_to_fp4": "(x, use_ue8m0, gran_k=128, use_packed_ue8m0=False)",
    "transpose_packed_fp4": "(a)",
    "cast_back_from_fp4": "(packed, sf, gran_k=128, use_packed_ue8m0=False)",
    # added by DeepGEMM 0.2.3 (sgl-deep-gemm 0.2.3.post2)
    "cast_to_ue4m3": "(x)",
    "pack_ue4m3_to_int": "(x)",
    "unpack_ue4m3_from_int": "(packed_sf)",
    "per_token_cast_to_nvfp4": "(x, gran_k=16, use_packed_ue4m3=False)",
    "transform_ue4m3_sf_into_required_layout": "(sf, mn)",
    "cast_back_from_fp8": "(x_fp8, sf, gran_k=128, use_packed_ue8m0=False)",
}
LAYOUT_NAMES = {
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", "set_mk_alignment_for_contiguous_layout",
    "get_mk_alignment_for_contiguous_layout", "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
}


def _params(fn) -> list:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def _expected_params(text: str) -> list:
    inner = text.split("(", 1)[1].rsplit(")", 1)[0]
    out = []
    for part in filter(None, (p.strip() for p in inner.split(","))):
        name, _, default = part.partition("=")
        name = name.split(":")[0].strip()
        out.append((name, eval(default) if default else inspect.Parameter.empty))
    return out


@pytest.mark.parametrize("name", sorted(MATH_SIGNATURES))
def test_math_module_has_deepgemms_functions_and_signatures(name):
    from deep_gemm.utils import math as dg_math
    assert name in dg_math.__all__
    assert _params(getattr(dg_math, name)) == _expected_params(MATH_SIGNATURES[name])
    assert getattr(utils, name) is getattr(dg_math, name) is getattr(deep_gemm, name)


def test_module_exports_are_exactly_deepgemms():
    from deep_gemm.utils import layout, math as dg_math
    assert set(dg_math.__all__) == set(MATH_SIGNATURES)
    assert set(layout.__all__) == LAYOUT_NAMES == set(utils.LAYOUT_NAMES)
    assert set(utils.__all__) == set(MATH_SIGNATURES) | LAYOUT_NAMES | {"init_dist", "uneven_all_gather"}


def test_client_import_lines():
    # SGLang (deep_gemm_wrapper/entrypoint.py, quantization/fp8_utils.py), vLLM, DeepGEMM's tests.
    from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor, get_mn_major_tma_aligned_packed_ue8m0_tensor
    from deep_gemm.utils.layout import get_tma_aligned_size  # noqa: F401
    import deep_gemm.utils.layout  # noqa: F401
    from deep_gemm.utils.math import align, per_block_cast_to_fp8, per_token_cast_to_fp8, pack_ue8m0_to_int  # noqa
    from deep_gemm.utils import (per_channel_cast_to_fp8, per_token_cast_to_fp4, transpose_packed_fp4,  # noqa
                                 cast_back_from_fp4, get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor)
    from deep_gemm.utils.dist import init_dist, uneven_all_gather, dist_print  # noqa: F401
    assert get_mn_major_tma_aligned_tensor is deep_gemm.get_mn_major_tma_aligned_tensor
    assert get_mn_major_tma_aligned_packed_ue8m0_tensor is deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor
    assert deep_gemm.init_dist is init_dist and deep_gemm.uneven_all_gather is uneven_all_gather
    assert deep_gemm.utils.layout.get_m_alignment_for_contiguous_layout() == 128


def test_layout_helpers_through_the_utils_module():
    sf = torch.rand(129, 7)
    out = utils.layout.get_mn_major_tma_aligned_tensor(sf)
    assert out.stride() == (1, utils.get_tma_aligned_size(129, 4)) and torch.equal(out, sf)
    assert utils.get_tma_aligned_size(129, 4) == 132
    assert utils.get_tma_aligned_size(mn=5, element_size=2) == 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DIST_WORKER = textwrap.dedent("""
    import sys, torch, torch.multiprocessing as mp

    def worker(local_rank, num_ranks):
        from deep_gemm.utils import init_dist, uneven_all_gather
        from deep_gemm.utils.dist import dist_print
        assert not torch.distributed.is_initialized()  # importing deep_gemm starts nothing
        rank, world, group = init_dist(local_rank, num_ranks, backend="gloo")
        assert (rank, world) == (local_rank, num_ranks)
        mine = torch.full((rank + 1, 3), float(rank))              # rank r contributes r + 1 rows
        got = uneven_all_gather(mine, dim=0, group=group)
        want = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(world)])
        assert torch.equal(got, want), got
        cols = uneven_all_gather(torch.full((2, rank + 2), float(rank)), dim=1)  # the default group
        assert cols.shape == (2, sum(r + 2 for r in range(world)))
        dist_print(f"ok {rank}", once_in_node=True)
        torch.distributed.destroy_process_group()

    if __name__ == "__main__":
        # fork: the workers inherit the imported torch and deep_gemm (a spawned worker re-imports them, seconds each)
        mp.start_processes(worker, args=(2,), nprocs=2, start_method="fork")
""")


def test_init_dist_and_uneven_all_gather_on_two_cpu_processes(tmp_path):
    script = tmp_path / "dist_worker.py"
    script.write_text(_DIST_WORKER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_PORT": str(_free_port()), "MASTER_ADDR": "127.0.0.1"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ok 0") == 1 and "ok 1" not in done.stdout  # once per node: local rank 0 prints


# ---- packed UE8M0 scales with a single packed column (K = 512: four 128-wide scale groups) ----------------------

@pytest.mark.parametrize("mn", [1, 4, 128, 130])
def test_unpack_single_packed_column_with_mn_major_strides(mn):
    sf = utils.ceil_to_ue8m0(torch.rand(mn, 4) + 0.01)
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    assert packed.shape == (mn, 1) and packed.stride(0) == 1
    assert_bitwise_equal(utils.unpack_ue8m0_from_int(packed), sf)


@pytest.mark.parametrize("k", [512, 384])
def test_fp8_gemm_with_one_packed_scale_column(k):
    from deep_gemm.testing import calc_diff
    torch.manual_seed(k)
    m, n = 8, 256
    x, w = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16)
    a, sfa = utils.per_token_cast_to_fp8(x, use_ue8m0=True)
    b, sfb = utils.per_block_cast_to_fp8(w, use_ue8m0=True)
    packed_a = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa)
    packed_b = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfb.repeat_interleave(128, dim=0)[:n])
    assert packed_a.shape == (m, 1) and packed_a.stride() == (1, m)
    d, ref = torch.empty(m, n, dtype=torch.bfloat16), torch.empty(m, n, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt((a, packed_a), (b, packed_b), d)
    deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), ref)
    assert torch.equal(d, ref)
    assert calc_diff(d, x.double() @ w.double().T) < 1e-3


DG_TESTS = ROOT / ".dg" / "DeepGEMM" / "tests"


@pytest.mark.skipif(not DG_TESTS.is_dir(), reason="DeepGEMM's source is not checked out beside us (.dg/)")
def test_every_import_line_of_deepgemms_tests_resolves_against_us():
    import ast
    sys.path.insert(0, str(DG_TESTS))
    try:
        failures = []
        for path in sorted(DG_TESTS.glob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    line = ast.unparse(node)
                    try:
                        exec(line, {})
                    except Exception as error:  # noqa: BLE001  (report every failing line at once)
                        failures.append(f"{path.name}: {line}: {error}")
        assert not failures, "\n".join(failures)
    finally:
        sys.path.remove(str(DG_TESTS))
