"""The GPU architecture gate (deep_gemm.core.arch): with the capability forced to 8.0 / 8.9 / 9.0 / 10.0 / 12.0, each
family's plan picks kernels that architecture can run (sm_90a-only kernels on 9.0 only, FP8 on 8.0 the reference),
sized to its shared memory, and ``deep_gemm.backends(device=...)`` says so. Plans are pure functions of the call
(its ``sm`` field); launchers read the device's capability, forced here through ``arch.forced_capability``.

The last test compiles a few of the portable variants for sm_120a / sm_100a / sm_89 / sm_80 on the CPU
(scripts/compile_check_arch.py, in a subprocess without TRITON_INTERPRET)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
import torch

import deep_gemm
from deep_gemm.core import arch
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.core.registry import _Binder, kernels_of, run_launcher
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.core.runtime import _STATE as RUNTIME

from fp8_inputs import oracle_gemm, quantize
from tolerances import TOLERANCES
from triton_harness import DEVICE

CAPABILITIES = [(8, 0), (8, 9), (9, 0), (10, 0), (12, 0)]
SMS = [arch.sm_of(c) for c in CAPABILITIES]


# ---- the arch module ----------------------------------------------------------------------------------------------

def test_capability_without_cuda_is_the_kernels_target_and_forcing_nests_and_restores():
    if torch.cuda.is_available():
        pytest.skip("reads the default of a host without CUDA")
    assert arch.capability() == (9, 0) and arch.sm() == 90
    version = RUNTIME.version
    with arch.forced_capability((12, 0)):
        assert arch.capability() == arch.capability(3) == (12, 0)
        assert RUNTIME.version == version + 1  # memoised checks and launch plans are not reused across it
        with arch.forced_capability((8, 0), device_index=1):
            assert arch.capability(1) == (8, 0) and arch.capability(0) == (12, 0)
        assert arch.capability(1) == (12, 0)
        assert arch.sm_of_tensor(torch.empty(1)) == 120  # (CPU tensors: the interpreter's launches)
    assert arch.capability() == (9, 0) and RUNTIME.version == version + 4


@pytest.mark.parametrize("bad", [(9,), "9.0", (9, 0, 1), (9.0, 0), (True, 0), (0, 0), (9, 10)])
def test_forced_capability_rejects_bad_input(bad):
    with pytest.raises(DeepGEMMError, match="capability"):
        with arch.forced_capability(bad):
            pass


def test_predicates_per_architecture():
    table = {sm: (arch.has_wgmma(sm), arch.has_tma(sm), arch.has_fp8_mma(sm), arch.kernels_run(sm)) for sm in SMS}
    assert table == {80: (False, False, False, True), 89: (False, False, True, True), 90: (True, True, True, True),
                     100: (False, True, True, True), 120: (False, True, True, True)}
    assert not arch.kernels_run(75)
    assert [arch.shared_memory(sm) for sm in SMS] == [166_912, 101_376, 232_448, 232_448, 101_376]
    assert arch.shared_memory(121) == 101_376 and arch.shared_memory(110) == 232_448  # (by major where unlisted)
    assert arch.smem_budget(220 * 1024, 90) == 220 * 1024
    assert arch.smem_budget(220 * 1024, 120) == 220 * 1024 - (232_448 - 101_376)


# ---- plans per architecture -----------------------------------------------------------------------------------------

def _fp8_calls(sm):
    from deep_gemm.gemm.fp8.plan import GROUPING as G, Fp8Call
    return {"dense": Fp8Call(G["dense"], 4096, 7168, 2048, 1, 132, sm=sm),
            "dense_m128": Fp8Call(G["dense"], 128, 4096, 7168, 1, 132, sm=sm),
            "wgrad": Fp8Call(G["dense"], 2112, 4096, 7168, 1, 132, b_per_row=True, has_c=True, out_bytes=4,
                             c_tma=True, sm=sm),
            "m_ids": Fp8Call(G["m_ids"], 4 * 8192, 7168, 3072, 4, 132, sm=sm),
            "masked": Fp8Call(G["masked"], 1024, 4096, 4096, 6, 132, expected_m=1024, sm=sm),
            "k_grouped": Fp8Call(G["k_grouped"], 4096, 7168, 34304, 4, 132, b_per_row=True, has_c=True,
                                 out_bytes=4, c_tma=True, sm=sm)}


@pytest.mark.parametrize("sm", SMS)
def test_fp8_plan_runs_the_warp_specialised_kernel_on_sm90_only(sm):
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    for name, call in _fp8_calls(sm).items():
        p = fp8_plan.plan(call)
        assert p.kernel == ("ws" if sm == 90 else "tl"), (name, sm, p)
        if sm != 90:
            assert p.ws is None and p.row_tail == 0, (name, p)
            cfg = p.config
            # the stage ring and a BF16 tile of epilogue staging within the device's shared memory
            need = (cfg.num_stages * (cfg.block_m + cfg.block_n) * fp8_configs.BLOCK_K
                    + cfg.block_m * cfg.block_n * 2 + fp8_configs.SMALL_SMEM_RESERVE)
            assert cfg.num_stages >= 1 and need <= arch.shared_memory(sm), (name, sm, cfg)
    # the heuristic's 128 x 128 tile keeps 4 stages where the device has sm_90's shared memory, 2 in 99 KB
    stages = fp8_plan.plan(_fp8_calls(sm)["dense"]).config.num_stages
    assert stages == {80: 4, 89: 2, 90: 4, 100: 4, 120: 2}[sm]


@pytest.mark.parametrize("sm", SMS)
def test_bf16_plan_runs_the_warp_specialised_kernel_on_sm90_only(sm):
    from deep_gemm.gemm.bf16 import plan as bf16_plan
    from deep_gemm.gemm.bf16.plan import GROUPING as G, Bf16Call
    calls = {"dense": Bf16Call(G["dense"], 4096, 7168, 2048, 1, 132, False, 2, True, True, True, d_aligned=True,
                               sm=sm),
             "masked": Bf16Call(G["masked"], 1024, 4096, 4096, 6, 132, False, 2, True, True, False, expected_m=1024,
                                d_aligned=True, sm=sm),
             "k_grouped": Bf16Call(G["k_grouped"], 4096, 7168, 34304, 4, 132, True, 4, False, False, False,
                                   k_divisor=128, c_tma=True, d_aligned=True, sm=sm),
             "psum": Bf16Call(G["m_psum"], 8 * 4096, 4096, 2048, 8, 132, False, 2, True, False, False,
                              k_divisor=2048, zero_gaps=False, d_aligned=True, sm=sm)}
    for name, call in calls.items():
        p = bf16_plan.plan(call)
        assert p is not None and p.kernel == ("ws" if sm == 90 else "tl"), (name, sm, p)
        cfg = p.config
        if sm != 90:
            epilogue = cfg.block_m * cfg.block_n * call.out_bytes if p.d_tma else 0
            ring = cfg.num_stages * (cfg.block_m + cfg.tile_n) * cfg.block_k * 2
            assert ring + epilogue <= arch.smem_budget(bf16_plan.SMEM_BYTES, sm), (name, sm, cfg)
    assert bf16_plan.plan(dataclasses.replace(calls["dense"], sm=75)) is None  # (no BF16 MMA: the reference)


def test_fp8_and_bf16_plans_on_sm90_are_the_default_calls():
    """A call without an ``sm`` is an sm_90 call: the plans there are what they were before the gate."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8.plan import GROUPING as G, Fp8Call
    assert Fp8Call(G["dense"], 1, 1, 1, 1, 1).sm == 90
    for call in _fp8_calls(90).values():
        assert fp8_plan.plan(call) == fp8_plan.plan(dataclasses.replace(call, sm=arch.SM90))


@pytest.mark.parametrize("sm", SMS)
def test_hc_plan_fits_the_device_and_reads_b_by_tma_only_where_there_is_tma(sm):
    from deep_gemm.hyperconnection import plan as hc_plan
    from deep_gemm.hyperconnection.checks import BLOCK_K
    for m, n, k, splits in ((4096, 24, 28672, 1), (13, 24, 7168, 16), (8192, 128, 7168, 1)):
        cfg = hc_plan.plan(m, n, k, splits, 132, sm)
        stage = cfg.block_m * BLOCK_K * 2 + cfg.block_n * BLOCK_K * 4
        assert cfg.stages * stage <= arch.smem_budget(hc_plan.SMEM_ONE_PROGRAM, sm), (sm, cfg)
    # (256 programs on 132 SMs: two share an SM, half the budget each)
    assert hc_plan.plan(4096, 24, 28672, 1, 132, sm).stages == {80: 4, 89: 2, 90: 6, 100: 6, 120: 2}[sm]
    assert {c["b_tma"] for c in hc_plan.compile_configs(sm)} == ({True, False} if sm >= 90 else {False})


@pytest.mark.parametrize("sm", SMS)
def test_einsum_tiles_fit_the_device(sm):
    from deep_gemm.einsum import plan as et
    large = et.bh_config(8, 4096, 1024, 4096, True)
    assert large is et.BH_LARGE
    fitted = et.fitted_bh_config(large, 2, False, sm)
    if arch.shared_memory(sm) >= arch.SM90_SHARED_MEMORY:
        assert fitted is large
    else:
        ring = fitted.num_stages * (fitted.block_m + fitted.block_n) * fitted.block_k * 2
        assert ring + fitted.block_m * fitted.block_n * 2 <= arch.shared_memory(sm) - et.SMEM_MARGIN
        assert fitted.num_stages >= 2 and fitted.persistent and not fitted.d_halves
    fp8 = et.fitted_fp8_config(et.FP8_CONFIGS[0], 4, True, 128, sm)  # (FP32 D and C staged)
    if arch.shared_memory(sm) >= arch.SM90_SHARED_MEMORY:
        assert fp8 is et.FP8_CONFIGS[0]
    else:
        ring = fp8.num_stages * (fp8.block_m + fp8.block_n) * 128
        assert ring + 2 * fp8.block_m * fp8.block_n * 4 <= arch.shared_memory(sm) - et.SMEM_MARGIN
        assert fp8.num_stages >= 2 and (fp8.block_m, fp8.block_n) < (128, 128)  # (a narrower tile, pipelined)


def test_einsum_grid_reduction_is_offered_only_with_sm90_occupancy():
    from deep_gemm.einsum import plan as et
    s, m, n, k = 4096, 256, 256, 256
    assert et.bmk_plan(s, m, n, k, reduce="grid", cooperative=True).reduce == "grid"
    for sm in (80, 89, 120):
        # (without a pinned reduction the model never prices "grid" lowest; pinned it stays, and the launcher runs
        # the parallel reduction instead: the same bits)
        assert et.bmk_plan(s, m, n, k, cooperative=True, sm=sm).reduce != "grid"
    assert not arch.sm90_occupancy(120) and arch.sm90_occupancy(100)


@pytest.mark.parametrize("sm", SMS)
def test_legacy_tiles_fit_the_device(sm):
    from deep_gemm.legacy.plan import M_GROUPED_TILE, SMEM_MARGIN
    tile = M_GROUPED_TILE.for_sm(sm)
    assert tile.smem_bytes() <= arch.shared_memory(sm) - SMEM_MARGIN
    assert (tile is M_GROUPED_TILE) == (sm not in (89, 120))


# ---- launchers: declining what the device cannot run --------------------------------------------------------------

def _fp8_dense_args(m=32, n=128, k=256, device=DEVICE):
    a = tuple(x.to(device) for x in quantize(torch.randn(m, k), 1))
    b = tuple(x.to(device) for x in quantize(torch.randn(n, k), 128))
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
    return a, b, d


def _oracle(a, sfa, b, sfb):
    return oracle_gemm(a.cpu(), sfa.cpu(), (1, 128), b.cpu(), sfb.cpu(), (128, 128))


def test_fp8_on_sm80_runs_the_reference_through_the_cuda_kernel():
    """The op's CUDA path (``OpKernels.run_cuda``: the launcher, then the reference where it declines; on a host
    without CUDA, CPU tensors stand in) with an sm_80 capability: the launcher declines FP8, the reference writes D."""
    (a, sfa), (b, sfb), d = _fp8_dense_args()
    args = (a, sfa, b, sfb, d, None, None, None, None, "nk", False)
    with arch.forced_capability((8, 0)):
        assert run_launcher("fp8_gemm_nt", *args) is NotImplemented
        kernels = kernels_of("fp8_gemm_nt")
        full = _Binder(SCHEMAS["fp8_gemm_nt"])(args, {})
        kernels.run_cuda(full, kernels.checked(full))
    assert deep_gemm.testing.calc_diff(d.cpu(), _oracle(a, sfa, b, sfb)) < TOLERANCES["kernel_fp8"]


def test_fp8_on_sm89_and_sm120_runs_the_portable_kernel():
    """The same call on sm_89 / sm_120: the tl.* kernel runs (in the interpreter without CUDA) with that device's
    plan."""
    (a, sfa), (b, sfb), d = _fp8_dense_args()
    expected = _oracle(a, sfa, b, sfb)
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    for cap in ((8, 9), (12, 0)):
        d.fill_(float("nan"))
        with arch.forced_capability(cap):
            call = fp8_launch.dense_call(*d.shape, a.size(1), d, None, False)
            assert call.sm == arch.sm_of(cap) and fp8_plan.plan(call).kernel == "tl"
            assert run_launcher("fp8_gemm_nt", a, sfa, b, sfb, d, None, None, None, None, "nk", False) is None
        assert deep_gemm.testing.calc_diff(d.cpu(), expected) < TOLERANCES["kernel_fp8"], cap


def test_every_fp8_launcher_declines_on_sm80():
    from deep_gemm.attention import launch as tl
    from deep_gemm.einsum import launch as et
    from deep_gemm.gemm.cublaslt import api as cublaslt
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    (a, sfa), (b, sfb), _ = _fp8_dense_args(128, 128, 256, device="cpu")  # (nothing launches)
    with arch.forced_capability((8, 0)):
        d3 = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
        masked = torch.tensor([128, 64], dtype=torch.int32)
        a3, sfa3 = a.view(1, 128, 256).expand(2, -1, -1).contiguous(), sfa.view(1, 128, 2).expand(2, -1, -1)
        b3, sfb3 = b.view(1, 128, 256).expand(2, -1, -1).contiguous(), sfb.view(1, 1, 2).expand(2, -1, -1)
        assert fp8_launch.m_grouped_fp8_gemm_nt_masked(a3, sfa3.contiguous(), b3, sfb3.contiguous(), d3, masked, 128,
                                                        None, None, None, "nk", False) is NotImplemented
        ks = [128, 128]
        dk = torch.zeros(2, 128, 128)
        assert fp8_launch.k_grouped_fp8_gemm_nt_contiguous(
            a.view(-1), sfa, b.view(-1), sfb, dk, ks, torch.tensor(ks, dtype=torch.int32), dk, None, "mn",
            False) is NotImplemented
        assert cublaslt.cublaslt_gemm_nt(a, b, torch.zeros(128, 128, dtype=torch.bfloat16), None) is NotImplemented
        from deep_gemm.attention.sparse import launch as sparse_launch
        q8 = torch.zeros(4, 64, 128, dtype=torch.float8_e4m3fn)  # (declined before any other argument is read)
        assert sparse_launch.fp8_fp4_sparse_mqa_logits_triton(q8, None, None, None, None, None, 1, 8,
                                                              False) is NotImplemented
        assert sparse_launch.fp8_fp4_paged_sparse_mqa_logits_triton(q8, None, None, None, None, 1, 8) is NotImplemented
        q = torch.zeros(4, 64, 128, dtype=torch.float8_e4m3fn)
        assert tl.fp8_mqa_logits_triton(q, q[0], torch.ones(64), torch.ones(4, 64), torch.zeros(4, dtype=torch.int32),
                                        torch.full((4,), 64, dtype=torch.int32), False, 0) is NotImplemented
        # "bhr,hdr->bhd": A [b, h, r] per row, B [h, d, r] per 128 rows, D [b, h, d]
        ea = quantize(torch.randn(4 * 2, 256), 1)
        eb = quantize(torch.randn(2 * 128, 256), 128)
        assert et.fp8_einsum("bhr,hdr->bhd", ea[0].view(4, 2, 256), ea[1].view(4, 2, 2), eb[0].view(2, 128, 256),
                             eb[1].view(2, 1, 2), torch.zeros(4, 2, 128, dtype=torch.bfloat16), None,
                             None) is NotImplemented


def test_layout_launchers_decline_below_sm80():
    from deep_gemm.layout import launch as layout_launch
    sf = torch.rand(256, 4, device=DEVICE)
    with arch.forced_capability((7, 5)):
        assert layout_launch.get_mn_major_tma_aligned_tensor(sf) is NotImplemented
        assert layout_launch.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, None) is NotImplemented
    with arch.forced_capability((8, 0)):
        out = layout_launch.get_mn_major_tma_aligned_tensor(sf)
    assert torch.equal(out, sf)


# ---- backends(device=...) -----------------------------------------------------------------------------------------

def _kind(backend: str) -> str:
    if backend == "reference":
        return "reference"
    assert backend.startswith("triton"), backend
    return "portable" if backend.startswith("triton (portable") else "triton"


def _expected(cap):
    """What backends() says of a few ops on a device of capability ``cap``."""
    sm = arch.sm_of(cap)
    sm90_kernels = "triton" if sm == 90 else "portable"  # (ops with warp-specialised kernels)
    fp8 = "reference" if sm < 89 else "triton"
    return {"fp8_gemm_nt": "reference" if sm < 89 else sm90_kernels, "m_grouped_fp8_gemm_nt_masked":
            "reference" if sm < 89 else sm90_kernels, "bf16_gemm_nt": sm90_kernels,
            "k_grouped_bf16_gemm_tn_contiguous": sm90_kernels, "fp8_einsum": "reference" if sm < 89 else sm90_kernels,
            "einsum": "triton", "tf32_hc_prenorm_gemm": "triton", "fp8_mqa_logits": fp8, "fp8_paged_mqa_logits": fp8,
            "get_paged_mqa_logits_metadata": "triton", "get_mn_major_tma_aligned_tensor": "triton",
            "cublaslt_gemm_nt": "triton"}


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_backends_per_forced_capability(cap):
    with arch.forced_capability(cap):
        for device in (None, 0, "cuda", "cuda:0", torch.device("cuda", 0)):
            report = deep_gemm.backends(device)
            assert {op: _kind(report[op]) for op in _expected(cap)} == _expected(cap), (cap, device)
            assert report["get_num_sms"] == "host"
            assert report["fp8_fp4_gemm_nt"] == report["fp8_gemm_nt"]  # (aliases report their canonical op)
            # notes follow the kind: 'triton (portable; note)'
            if _kind(report["fp8_gemm_nt"]) == "portable":
                assert report["fp8_gemm_nt"].startswith("triton (portable; FP4 operands, int32 UE8M0 scales")
            assert ("the reference for FP8 below sm_89" in report["cublaslt_gemm_nt"]) == (cap < (8, 9))


def test_backends_default_on_a_host_without_cuda_is_the_sm90_report():
    if torch.cuda.is_available():
        pytest.skip("reads the default of a host without CUDA")
    report = deep_gemm.backends()
    assert report == deep_gemm.backends(0) == deep_gemm.backends("cuda:1")
    with arch.forced_capability((9, 0)):
        assert deep_gemm.backends() == report
    assert report["fp8_gemm_nt"].startswith("triton (FP4 operands, int32 UE8M0") and report["bf16_gemm_nt"] == "triton"


def test_backends_below_sm80_and_for_a_cpu_device():
    with arch.forced_capability((7, 5)):
        report = deep_gemm.backends()
    assert report["bf16_gemm_nt"] == report["fp8_gemm_nt"] == report["tf32_hc_prenorm_gemm"] == "reference"
    assert report["cublaslt_gemm_nt"].startswith("triton (cuBLAS")  # (cuBLAS runs anywhere torch does)
    cpu = deep_gemm.backends("cpu")
    assert {v for k, v in cpu.items() if v != "host"} == {"reference"} and cpu["get_num_sms"] == "host"


@pytest.mark.parametrize("device", ["tpu", 1.5, True, "cuda:x", [0]])
def test_backends_rejects_bad_devices(device):
    with pytest.raises(DeepGEMMError, match="device"):
        deep_gemm.backends(device)


# ---- compile check for other architectures (CPU, no GPU) ---------------------------------------------------------

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "compile_check_arch.py")


def test_portable_kernels_compile_for_other_architectures():
    """A few variants the plans pick, built for sm_120a (the FP8 tile fitted to 99 KB; the Mega MoE L1 pipeline at
    128 rows, its depth fitted the same way), sm_100a (HC, TMA), sm_89 (the BF16 einsum tile) and sm_80 (the BF16
    GEMM; the legacy kernel; the FP4 kernel; sparse MQA with FP4 q, FP8 q running the reference): each compiles and
    fits the device's shared memory. The whole matrix: ``python scripts/compile_check_arch.py``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    only = ["120:fp8", "100:hc", "89:einsum", "80:bf16", "80:legacy", "80:fp8", "80:fp4", "120:mega", "80:sparse"]
    out = subprocess.run([sys.executable, SCRIPT, "--quick", "--json", "--only", *only], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])["results"]
    checked = {(r["arch"], r["family"]) for r in results}
    assert checked == {tuple((int(p.split(":")[0]), p.split(":")[1])) for p in only}
    for r in results:
        assert r["ok"], r
        if r.get("skipped"):
            assert (r["arch"], r["family"]) == (80, "fp8")  # FP8 on sm_80: the reference, nothing to build
            continue
        assert 0 < r["smem"] <= arch.shared_memory(r["arch"]), r
    fp8 = next(r for r in results if r["family"] == "fp8" and not r.get("skipped"))
    assert "bm=128 bn=128" in fp8["label"] and "stages=2" in fp8["label"] and math.isfinite(fp8["smem"])
    mega = [r["label"] for r in results if r["family"] == "mega"]
    assert mega[0].startswith("l1 bm=128"), mega  # 4 stages need 101,400 bytes: more than sm_120's 101,376
    sparse = [r["label"] for r in results if r["family"] == "sparse"]
    assert sparse and not any("fp4=False" in label and label.startswith("logits") for label in sparse), sparse
