"""The compatibility seam (``deep_gemm._internals``): every private torch/Triton entry point has a public fallback
that gives the same answer, and version parsing reads every release string form."""

from __future__ import annotations

import torch

from deep_gemm._internals import COMPILE_OPTIONS, parse_version, torch_api, triton_version


def test_parse_version_reads_release_local_and_dev_forms():
    assert parse_version("3.8.0") == (3, 8, 0)
    assert parse_version("2.14.1+cu130") == (2, 14, 1)
    assert parse_version("3.9.0.dev20261101") == (3, 9, 0)
    assert parse_version("2.15") == (2, 15, 0)


def test_the_installed_triton_is_a_supported_release():
    assert triton_version() is not None and (3, 6) <= triton_version()[:2] <= (3, 9)


def test_private_entry_points_are_found_or_replaced_by_the_public_api():
    # A CPU build of torch has no CUDA entry points: the public functions stand in (and must be callable names).
    private = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if private is not None:
        assert torch_api.current_raw_stream is private
        assert torch_api.is_current_stream_capturing is torch._C._cuda_isCurrentStreamCapturing
    else:
        assert torch_api.current_raw_stream is torch_api._public_raw_stream
        assert torch_api.is_current_stream_capturing is torch_api._public_capturing
        assert torch_api.cuda_current_device is torch.cuda.current_device


def test_eager_probes_answer_as_the_public_api_does():
    assert torch_api.EAGER_PROBES is not None, "this torch lacks an eager-path probe: every call pays the dispatcher"
    dispatch_depth, function_modes, functorch, tracing, profiling = torch_api.EAGER_PROBES
    assert dispatch_depth() == 0 and not function_modes() and not functorch() and tracing() is None
    assert not profiling()
    from torch.utils._python_dispatch import TorchDispatchMode

    with TorchDispatchMode():
        assert dispatch_depth() == 1
    with torch.autograd.profiler.profile():
        assert profiling()
    assert torch.vmap(lambda x: x * int(functorch()))(torch.ones(2)).tolist() == [1.0, 1.0]


def test_schema_parser_reads_names_defaults_and_alias_annotations():
    schema = torch_api.parse_schema("deep_gemm::probe(Tensor a, Tensor(a!) d, int k=7, str? s=None) -> ()")
    assert [a.name for a in schema.arguments] == ["a", "d", "k", "s"]
    assert schema.arguments[2].default_value == 7 and schema.arguments[1].alias_info.is_write


def test_tensor_guards_import_or_report_missing():
    cls = torch_api.tensor_guards_class()
    assert cls is None or callable(cls)


def test_compile_options_pin_fp_fusion_on():
    # The kernels were tuned and verified with FMA contraction: Triton 3.9 announces its default turning off.
    assert COMPILE_OPTIONS == {"enable_fp_fusion": True}
