"""deep_gemm.testing: accuracy measures, decorators, output suppression, and the GPU timers (GPU tests only)."""

import importlib
import os
import sys

import pytest
import torch

from deep_gemm import testing

# ---- calc_diff ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_calc_diff_of_a_tensor_with_itself_is_zero(dtype):
    x = torch.randn(37, 129).to(dtype)
    assert testing.calc_diff(x, x) == pytest.approx(0.0, abs=1e-12)


def test_calc_diff_of_zeros_is_zero():
    z = torch.zeros(5, 7)
    assert testing.calc_diff(z, z) == 0.0
    assert testing.calc_diff(torch.zeros(0, 3), torch.zeros(0, 3)) == 0.0


@pytest.mark.parametrize("scale", [0.5, 1.001, 2.0, 10.0])
def test_calc_diff_of_a_scaled_copy_matches_the_closed_form(scale):
    # For y = s*x: 1 - 2*s*|x|^2 / ((1 + s^2)|x|^2) = (1 - s)^2 / (1 + s^2), whatever x is.
    x = torch.randn(64, 48, dtype=torch.float64)
    expected = (1 - scale) ** 2 / (1 + scale ** 2)
    assert testing.calc_diff(x, scale * x) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_calc_diff_is_symmetric_and_sign_sensitive():
    x, y = torch.randn(100), torch.randn(100)
    assert testing.calc_diff(x, y) == pytest.approx(testing.calc_diff(y, x))
    assert testing.calc_diff(x, -x) == pytest.approx(2.0)


def test_calc_diff_small_relative_error_is_about_half_its_square():
    x = torch.randn(4096, dtype=torch.float64)
    eps = 1e-3
    y = x * (1 + eps * torch.sign(torch.randn(4096, dtype=torch.float64)))
    assert testing.calc_diff(x, y) == pytest.approx(eps ** 2 / 2, rel=0.05)


# ---- count_bytes -------------------------------------------------------------------------------------------------


def test_count_bytes_walks_nested_sequences_and_skips_none():
    a = torch.empty(3, 5, dtype=torch.float32)               # 60 bytes
    b = torch.empty(7, dtype=torch.bfloat16)                 # 14 bytes
    c = torch.empty(2, 3, dtype=torch.float8_e4m3fn)         # 6 bytes
    assert testing.count_bytes(a) == 60
    assert testing.count_bytes(a, None, (b, [c, None])) == 80
    assert testing.count_bytes() == 0
    assert testing.count_bytes(torch.empty(0, 9)) == 0


# ---- assert_bitwise_equal ----------------------------------------------------------------------------------------


def test_assert_bitwise_equal_accepts_identical_tensors_including_fp8_and_nan():
    x = torch.randn(9, 17)
    x[0, 0] = float("nan")
    testing.assert_bitwise_equal(x, x.clone())
    f8 = torch.randn(4, 8).to(torch.float8_e4m3fn)
    testing.assert_bitwise_equal(f8, f8.clone())
    testing.assert_bitwise_equal(torch.empty(0, 3), torch.empty(0, 3))


def test_assert_bitwise_equal_catches_a_single_flipped_bit():
    x = torch.randn(33, 65)
    y = x.clone()
    y.view(torch.int32)[12, 40] ^= 1  # lowest mantissa bit of one element
    assert not torch.equal(x.view(torch.int32), y.view(torch.int32))
    with pytest.raises(AssertionError, match="1 of .* bytes differ"):
        testing.assert_bitwise_equal(x, y, "flip")


def test_assert_bitwise_equal_catches_different_nan_payloads():
    x = torch.full((4,), float("nan"))
    y = x.clone()
    y.view(torch.int32)[2] = 0x7FC00001  # another quiet NaN
    assert torch.isnan(y).all()
    with pytest.raises(AssertionError, match="nan-payload: "):
        testing.assert_bitwise_equal(x, y, "nan-payload")


def test_assert_bitwise_equal_catches_signed_zero_and_metadata():
    with pytest.raises(AssertionError):
        testing.assert_bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    with pytest.raises(AssertionError, match="dtype"):
        testing.assert_bitwise_equal(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
    with pytest.raises(AssertionError, match="shape"):
        testing.assert_bitwise_equal(torch.zeros(3), torch.zeros(1, 3))


def test_assert_bitwise_equal_compares_values_not_strides():
    x = torch.randn(6, 10)
    testing.assert_bitwise_equal(x.t(), x.t().contiguous())


# ---- get_arch_major ----------------------------------------------------------------------------------------------


def test_get_arch_major_is_zero_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert testing.get_arch_major() == 0


@pytest.mark.gpu
def test_get_arch_major_matches_the_device():
    assert testing.get_arch_major() == torch.cuda.get_device_capability()[0] >= 1


# ---- test_filter -------------------------------------------------------------------------------------------------


def test_test_filter_runs_or_skips_by_condition(capsys):
    calls = []

    @testing.test_filter(lambda: True)
    def enabled(x, y=1):
        calls.append((x, y))
        return x + y

    @testing.test_filter(lambda: False)
    def disabled():
        calls.append("disabled")
        return "ran"

    assert enabled(2, y=3) == 5
    assert disabled() is None
    assert calls == [(2, 3)]
    assert "disabled: skipped" in capsys.readouterr().out
    assert enabled.__name__ == "enabled" and disabled.__name__ == "disabled"


def test_test_filter_evaluates_its_condition_at_each_call():
    state = {"on": False}
    ran = []

    @testing.test_filter(lambda: state["on"])
    def fn():
        ran.append(1)

    fn()
    state["on"] = True
    fn()
    assert ran == [1]


def test_test_filter_accepts_a_plain_bool():
    assert testing.test_filter(True)(lambda: 7)() == 7
    assert testing.test_filter(False)(lambda: 7)() is None


def test_test_filter_is_not_collected_by_pytest():
    assert testing.test_filter.__test__ is False


# ---- ignore_env --------------------------------------------------------------------------------------------------

_ENV = "DG_TEST_IGNORE_ENV_PROBE"


def test_ignore_env_hides_the_variable_and_restores_it(monkeypatch):
    monkeypatch.setenv(_ENV, "1")

    @testing.ignore_env(_ENV, lambda: True)
    def probe():
        return os.environ.get(_ENV)

    assert probe() is None
    assert os.environ[_ENV] == "1"


def test_ignore_env_restores_the_variable_when_the_function_raises(monkeypatch):
    monkeypatch.setenv(_ENV, "keep")

    @testing.ignore_env(_ENV, lambda: True)
    def boom():
        assert _ENV not in os.environ
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        boom()
    assert os.environ[_ENV] == "keep"


def test_ignore_env_leaves_the_variable_when_the_condition_is_false(monkeypatch):
    monkeypatch.setenv(_ENV, "seen")
    assert testing.ignore_env(_ENV, lambda: False)(lambda: os.environ.get(_ENV))() == "seen"


def test_ignore_env_with_an_unset_variable_keeps_it_unset(monkeypatch):
    monkeypatch.delenv(_ENV, raising=False)
    assert testing.ignore_env(_ENV, True)(lambda: 3)() == 3
    assert _ENV not in os.environ


# ---- output suppression ------------------------------------------------------------------------------------------


def test_suppress_stdout_stderr_silences_python_and_file_descriptor_writes(capfd):
    with testing.suppress_stdout_stderr():
        print("python stdout")
        print("python stderr", file=sys.stderr)
        os.write(1, b"fd1\n")
        os.write(2, b"fd2\n")
    print("after")
    os.write(2, b"after-fd2\n")
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert err == "after-fd2\n"


def test_suppress_stdout_stderr_restores_output_when_the_block_raises(capfd):
    saved = (sys.stdout, sys.stderr)
    with pytest.raises(RuntimeError):
        with testing.suppress_stdout_stderr():
            print("hidden")
            raise RuntimeError("inside")
    assert (sys.stdout, sys.stderr) == saved
    print("visible")
    assert capfd.readouterr().out == "visible\n"


def test_empty_suppress_lets_output_through(capfd):
    with testing.empty_suppress() as ctx:
        print("shown")
        os.write(2, b"also\n")
    assert isinstance(ctx, testing.empty_suppress)
    out, err = capfd.readouterr()
    assert out == "shown\n" and err == "also\n"


# ---- timers ------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
@pytest.mark.parametrize("timer", [lambda: testing.bench(lambda: None),
                                   lambda: testing.bench_kineto(lambda: None, "gemm")], ids=["bench", "bench_kineto"])
def test_timers_without_cuda_raise_a_clear_error(timer):
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        timer()


def test_bench_kineto_under_external_nvidia_tools_returns_ones(monkeypatch):
    monkeypatch.setenv("DG_USE_NVIDIA_TOOLS", "1")
    assert testing.bench_kineto(lambda: None, "gemm") == 1.0
    assert testing.bench_kineto(lambda: None, ("a", "b")) == (1.0, 1.0)


def test_l2_flush_is_several_times_the_l2():
    bench_module = importlib.import_module("deep_gemm.testing.bench")  # the function shadows the module name
    assert bench_module.MIN_L2_FLUSH_BYTES >= 4 * 60 * 2**20  # at least 4x an H200's 60 MiB L2


# torch.cuda._sleep(n) launches ATen's spin_kernel, which busy-waits n GPU clock cycles: a kernel of known minimum
# duration (2e6 cycles >= 0.95 ms at the H200's 2.1 GHz peak clock).
SPIN_CYCLES = 2_000_000
SPIN_MIN_S = 0.5e-3


@pytest.mark.gpu
def test_bench_measures_a_kernel_of_known_duration():
    spin = lambda: torch.cuda._sleep(SPIN_CYCLES)  # noqa: E731
    for high_precision in (False, True):
        seconds = testing.bench(spin, num_warmups=1, num_tests=3, high_precision=high_precision)
        assert SPIN_MIN_S < seconds < 0.1
    with pytest.raises(ValueError, match="num_tests"):
        testing.bench(spin, num_tests=0)


@pytest.mark.gpu
def test_bench_kineto_reports_kernel_time_per_name(tmp_path):
    x = torch.randn(1 << 22, device="cuda")

    def step():
        torch.cuda._sleep(SPIN_CYCLES)
        torch.sigmoid(x)

    spin = testing.bench_kineto(step, "spin_kernel", num_tests=3, suppress_kineto_output=True)
    assert isinstance(spin, float) and SPIN_MIN_S < spin < 0.1
    trace = tmp_path / "trace.json"
    t_spin, t_sigmoid, t_missing = testing.bench_kineto(step, ("spin_kernel", "sigmoid", "no_such_kernel"),
                                                        num_tests=3, trace_path=str(trace))
    assert SPIN_MIN_S < t_spin < 0.1 and 0 < t_sigmoid < t_spin and t_missing == 0.0
    assert trace.exists() and "spin_kernel" in trace.read_text()
    barriers = []
    assert testing.bench_kineto(step, "sigmoid", num_tests=3, flush_l2=False) > 0
    assert testing.bench_kineto(step, "sigmoid", num_tests=3, barrier=lambda: barriers.append(1)) > 0
    assert len(barriers) == 2 * 3  # one before every profiled call (warmup round + recorded round)


@pytest.mark.gpu
def test_bench_kineto_rejects_an_ambiguous_substring():
    x = torch.randn(1 << 20, device="cuda")

    def step():
        torch.sigmoid(x)
        torch.tanh(x)

    # Both are "vectorized_elementwise_kernel<...sigmoid...>" / "<...tanh...>": one substring, two kernels.
    with pytest.raises(AssertionError, match="matches .* different kernels"):
        testing.bench_kineto(step, "elementwise_kernel", num_tests=2, flush_l2=False)
    assert testing.bench_kineto(step, "elementwise_kernel", num_tests=2, flush_l2=False,
                                with_multiple_kernels=True) > 0
