"""get_mqa_logits_metadata against a Python walk of DeepGEMM's schedule (linear scans over the prefix sums), on
several SM budgets, plus opcheck, compile and bad inputs."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.attention.metadata import plan, reference

OP = torch.ops.deep_gemm.get_mqa_logits_metadata.default


def _walk(ks, ke, num_kv, num_heads, num_sms):
    bq = max(1, 128 // num_heads)
    nq = len(ks)
    blocks = -(-nq // bq)
    spans = []
    for b in range(blocks):
        rows = [min(b * bq + i, nq - 1) for i in range(bq)]
        start = min(min(max(ks[r], 0), num_kv) for r in rows)
        end = max(min(max(ke[r], 0), num_kv) for r in rows)
        base = start // 4 * 4
        spans.append((base, -(-max(end - base, 0) // plan.SPLIT_KV)))
    work, cost, w, c = [], [], 0, 0
    for _, n in spans:
        w += n
        c += n * plan.SPLIT_COST + (plan.SEGMENT_COST if n else 0)
        work.append(w), cost.append(c)

    def locate(i):
        target = i * (c // num_sms) + min(i, c % num_sms)
        if target == c:
            return (blocks, 0), w
        b = 0
        while b < blocks and cost[b] <= target:
            b += 1
        cb = cost[b - 1] if b else 0
        wb = work[b - 1] if b else 0
        off = min((max(target - cb, plan.SEGMENT_COST) - plan.SEGMENT_COST) // plan.SPLIT_COST, work[b] - wb - 1)
        return (b, off), wb + off

    words = [0] * plan.span_word_offset(num_sms)
    for s in range(num_sms):
        (b, off), coord = locate(s)
        _, end_coord = locate(s + 1)
        words[2 * s], words[2 * s + 1] = b, off
        words[2 * num_sms + s] = end_coord - coord
    for base, n in spans:
        words += [base, n]
    return words


@pytest.mark.parametrize("num_sms", (1, 3, 7, 148))
@pytest.mark.parametrize("num_heads", (32, 64, 16))
def test_matches_walk(monkeypatch, num_sms, num_heads):
    monkeypatch.setattr(reference, "schedule_sms", lambda: num_sms)
    gen = torch.Generator().manual_seed(num_sms * 100 + num_heads)
    nq, num_kv = 13, 3000
    ks = torch.randint(0, 2000, (nq,), generator=gen, dtype=torch.int32)
    ke = ks + torch.randint(-10, 1500, (nq,), generator=gen, dtype=torch.int32)  # some empty / inverted rows
    got = OP(ks, ke, num_kv, num_heads)
    assert got.dtype == torch.int32
    assert got.tolist() == _walk(ks.tolist(), ke.tolist(), num_kv, num_heads, num_sms)
    counts = got[2 * num_sms:3 * num_sms]
    spans = got[plan.span_word_offset(num_sms):].view(-1, 2)
    assert int(counts.sum()) == int(spans[:, 1].sum())  # every split scheduled exactly once


def test_empty_and_default_budget():
    out = deep_gemm.get_mqa_logits_metadata(torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                                            10, 32)
    assert out.numel() == plan.span_word_offset(plan.schedule_sms())
    ks = torch.zeros(3, dtype=torch.int32)
    same = deep_gemm.get_mqa_logits_metadata(ks, ks, 10, 32)  # no work at all: every SM at the end, count 0
    assert int(same[2 * plan.schedule_sms():3 * plan.schedule_sms()].abs().sum()) == 0


def test_opcheck_and_compile():
    ks = torch.tensor([0, 10, 40], dtype=torch.int32)
    ke = torch.tensor([500, 600, 900], dtype=torch.int32)
    torch.library.opcheck(OP, (ks, ke, 1000, 32))

    def f(a, b):
        return deep_gemm.get_mqa_logits_metadata(a, b, 1000, 64) + 0

    assert torch.equal(torch.compile(f, fullgraph=True, backend="aot_eager")(ks, ke), f(ks, ke))


@pytest.mark.parametrize("args,message", [
    ((torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int32), 5, 32),
     r"cu_seq_len_k_start: expected dtype int32"),
    ((torch.zeros(3, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 5, 32), r"cu_seq_len_k_end: expected 3"),
    ((torch.zeros(3, dtype=torch.int32), torch.zeros(3, dtype=torch.int32), -1, 32), r"num_kv_tokens: expected"),
    ((torch.zeros(3, dtype=torch.int32), torch.zeros(3, dtype=torch.int32), 5, 48), r"num_heads: expected one of"),
])
def test_bad_inputs(args, message):
    with pytest.raises(DeepGEMMError, match=message):
        OP(*args)
