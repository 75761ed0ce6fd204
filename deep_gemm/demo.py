"""Self-check: run every op family once on the best available device and compare with a float64 oracle.

    python -m deep_gemm            # CUDA if available (Triton kernels / GPU reference), else the CPU reference
    python -m deep_gemm --help

Families: FP8 GEMMs (dense, M-grouped contiguous and masked, K-grouped), BF16 GEMM, einsum and fp8_einsum, the
indexer (MQA logits, paged MQA logits with its schedule metadata), HyperConnection prenorm, scale layouts, the Mega
MoE buffer contract and the legacy Triton grouped GEMM; then the K-grouped FP4 GEMM, batched_syrk, block-sparse MQA
logits, the MQA logits schedule, the fused MoE gate, mega_mhc and the SM90 FP8 Mega MoE layer.

Prints one row per case: op, backend (what ``deep_gemm.backends()`` says CUDA runs; "cpu reference" on CPU),
device, the error against an independent float64 computation, and the wall time of one warm call. The error is
``calc_diff(got, expected) = 1 - 2 sum(x y) / sum(x^2 + y^2)`` (DeepGEMM's metric: 0 for equal tensors, ~1e-4 for
BF16 rounding) for products, and the largest absolute difference for exact ops (layouts, metadata; for the Mega MoE
buffer the number of its views that overlap or leave the buffer). Exits non-zero if any case exceeds its tolerance.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

import deep_gemm
from deep_gemm.attention.reference import pack_paged_kv_cache
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

# calc_diff bar for FP8 products (DeepGEMM's own), and for BF16/TF32 products rounded once to BF16/FP32.
FP8_TOL = 1e-3
BF16_TOL = 1e-4
# The FP8 Mega MoE layer quantises its tokens and its intermediate to FP8 (the oracle keeps them exact).
MEGA_FP8_TOL = 1e-2


@dataclass
class Case:
    name: str  # op name as in torch.ops.deep_gemm
    run: Callable[[], torch.Tensor]  # runs the op, returns what to compare
    oracle: Callable[[], torch.Tensor]  # float64 expectation
    tol: float
    metric: str = "calc_diff"


def _f64(x: torch.Tensor, sf: torch.Tensor, gran_mn: int) -> torch.Tensor:
    """float64 values of a (data, per-row or per-block FP32 scale) operand."""
    rows = torch.arange(x.size(0), device=x.device) // gran_mn
    cols = torch.arange(x.size(1), device=x.device) // 128
    return x.double() * sf.double()[rows][:, cols]


def _cases(device: str) -> list[Case]:
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    cases = []
    m, n, k = 256, 512, 1024
    a = per_token_cast_to_fp8(randn(m, k), use_ue8m0=False)
    b = per_block_cast_to_fp8(randn(n, k), use_ue8m0=False)
    d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    cases.append(Case("fp8_gemm_nt", lambda: (deep_gemm.fp8_gemm_nt(a, b, d), d)[1],
                      lambda: _f64(*a, 1) @ _f64(*b, 128).T, FP8_TOL))

    groups, per_group = 4, 128
    ga = per_token_cast_to_fp8(randn(groups * per_group, k), use_ue8m0=False)
    gb_q = [per_block_cast_to_fp8(randn(n, k), use_ue8m0=False) for _ in range(groups)]
    gb = (torch.stack([q[0] for q in gb_q]), torch.stack([q[1] for q in gb_q]))
    ids = torch.arange(groups, device=device, dtype=torch.int32).repeat_interleave(per_group)
    gd = torch.empty(groups * per_group, n, device=device, dtype=torch.bfloat16)
    cases.append(Case("m_grouped_fp8_gemm_nt_contiguous",
                      lambda: (deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ga, gb, gd, ids), gd)[1],
                      lambda: torch.cat([_f64(ga[0][i * per_group:(i + 1) * per_group],
                                              ga[1][i * per_group:(i + 1) * per_group], 1)
                                         @ _f64(gb[0][i], gb[1][i], 128).T for i in range(groups)]), FP8_TOL))

    masked = torch.tensor([5, 128, 0, 77], device=device, dtype=torch.int32)
    ma = (ga[0].view(groups, per_group, k), ga[1].view(groups, per_group, -1))
    md = torch.zeros(groups, per_group, n, device=device, dtype=torch.bfloat16)

    def masked_rows(x):
        return torch.cat([x[i, :int(masked[i])] for i in range(groups)])

    cases.append(Case("m_grouped_fp8_gemm_nt_masked",
                      lambda: (deep_gemm.m_grouped_fp8_gemm_nt_masked(ma, gb, md, masked, 64), masked_rows(md))[1],
                      lambda: masked_rows(torch.stack([_f64(ma[0][i], ma[1][i], 1) @ _f64(gb[0][i], gb[1][i], 128).T
                                                       for i in range(groups)])), FP8_TOL))

    ba, bb = randn(m, k), randn(n, k)
    bd = torch.empty(m, n, device=device, dtype=torch.float32)
    cases.append(Case("bf16_gemm_nt", lambda: (deep_gemm.bf16_gemm_nt(ba, bb, bd), bd)[1],
                      lambda: ba.double() @ bb.double().T, BF16_TOL))

    ea, ew = randn(4, 8, 256), randn(8, 128, 256)
    ed = torch.empty(4, 8, 128, device=device, dtype=torch.bfloat16)
    cases.append(Case("einsum", lambda: (deep_gemm.einsum("bhr,hdr->bhd", ea, ew, ed), ed)[1],
                      lambda: torch.einsum("bhr,hdr->bhd", ea.double(), ew.double()), BF16_TOL))

    ha, hb = randn(64, 1024), randn(24, 1024, dtype=torch.float32)
    hd = torch.empty(64, 24, device=device)
    hs = torch.empty(64, device=device)
    cases.append(Case("tf32_hc_prenorm_gemm",
                      lambda: (deep_gemm.tf32_hc_prenorm_gemm(ha, hb, hd, hs), torch.cat([hd.flatten(), hs]))[1],
                      lambda: torch.cat([(ha.double() @ hb.double().T).flatten(), (ha.double() ** 2).sum(1)]),
                      FP8_TOL))

    s, sk, h, dim = 64, 512, 32, 64
    q = randn(s, h, dim).to(torch.float8_e4m3fn)
    kv = randn(sk, dim).to(torch.float8_e4m3fn)
    kv_sf = torch.rand(sk, generator=g).add(0.5).to(device)
    w = randn(s, h, dtype=torch.float32)
    ks = torch.zeros(s, device=device, dtype=torch.int32)
    ke = torch.full((s,), sk, device=device, dtype=torch.int32)

    def mqa_oracle():
        scores = torch.einsum("shd,td->sht", q.double(), kv.double()).relu()
        return (scores * w.double()[:, :, None]).sum(1) * kv_sf.double()[None, :]

    cases.append(Case("fp8_mqa_logits", lambda: deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), w, ks, ke), mqa_oracle,
                      FP8_TOL))

    # K-grouped FP8 (MoE weight gradients, tn layout): d[g] = c[g] + a_g.T @ b_g over each group's K rows.
    group_ks, km, kn = [128, 256], 64, 128
    ka = per_token_cast_to_fp8(randn(km, sum(group_ks)), use_ue8m0=False)     # per-row scales along K, then transposed
    kb = per_token_cast_to_fp8(randn(kn, sum(group_ks)), use_ue8m0=False)
    ka_t = (ka[0].T.contiguous(), ka[1].T.contiguous())                  # [sum K, M], [sum K / 128, M]
    kb_t = (kb[0].T.contiguous(), kb[1].T.contiguous())
    kd = torch.zeros(len(group_ks), km, kn, device=device)
    k_layout = torch.tensor(group_ks, device=device, dtype=torch.int32)

    def k_grouped_oracle():
        va, vb, out, start = _f64(*ka, 1), _f64(*kb, 1), [], 0
        for kg in group_ks:
            out.append(va[:, start:start + kg] @ vb[:, start:start + kg].T)
            start += kg
        return torch.stack(out)

    cases.append(Case("k_grouped_fp8_gemm_tn_contiguous",
                      lambda: (kd.zero_(),
                               deep_gemm.k_grouped_fp8_gemm_tn_contiguous(ka_t, kb_t, kd, group_ks, k_layout, c=kd),
                               kd)[2],
                      k_grouped_oracle, FP8_TOL))

    fa = per_token_cast_to_fp8(randn(4 * 8, 128), use_ue8m0=False)
    fw_q = [per_block_cast_to_fp8(randn(256, 128), use_ue8m0=False) for _ in range(8)]
    fw = (torch.stack([q[0] for q in fw_q]), torch.stack([q[1] for q in fw_q]))
    fd = torch.empty(4, 8, 256, device=device, dtype=torch.bfloat16)
    cases.append(Case("fp8_einsum",
                      lambda: (deep_gemm.fp8_einsum("bhr,hdr->bhd", (fa[0].view(4, 8, 128), fa[1].view(4, 8, 1)),
                                                    fw, fd), fd)[1],
                      lambda: torch.einsum("bhr,hdr->bhd", _f64(*fa, 1).view(4, 8, 128),
                                           torch.stack([_f64(fw[0][i], fw[1][i], 128) for i in range(8)])),
                      FP8_TOL))

    # Paged indexer: a KV cache of 64-token pages, each page [64 x 128 FP8 values | 64 x 4 bytes of FP32 scales].
    block, pdim, lens = 64, 128, [150, 9]
    vals, scls = [], []
    for n in lens:
        vals.append(torch.randn(n, pdim, generator=g).to(torch.float8_e4m3fn))
        scls.append(torch.rand(n, generator=g) + 0.5)
    keys = [v.double() * s.double()[:, None] for v, s in zip(vals, scls)]
    kv_cache, table = pack_paged_kv_cache(vals, scls, block)
    kv_cache, table = kv_cache.to(device), table.to(device)
    context_lens = torch.tensor(lens, dtype=torch.int32, device=device)[:, None].contiguous()  # [B, next_n = 1]
    pq = randn(len(lens), 1, 32, pdim).to(torch.float8_e4m3fn)
    pw = randn(len(lens), 32, dtype=torch.float32)
    max_len = 256
    num_sms = deep_gemm.get_num_sms() or 8  # no GPU: any schedule size is accepted

    def paged():
        meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, block, num_sms)
        out = deep_gemm.fp8_paged_mqa_logits(pq, kv_cache, pw, context_lens, table, meta, max_len)
        return torch.cat([out[i, :n] for i, n in enumerate(lens)])

    def paged_oracle():
        return torch.cat([pw[i].double().cpu() @ (pq[i, 0].double().cpu() @ keys[i].T).clamp(min=0)
                          for i in range(len(lens))]).to(device)

    cases.append(Case("fp8_paged_mqa_logits", paged, paged_oracle, FP8_TOL))

    def buffer_views_misplaced():
        buf = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, mma_type="fp8xfp4", device=device)
        start, end = buf.buffer.data_ptr(), buf.buffer.data_ptr() + buf.buffer.numel()
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
                       for t in (buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, buf.l1_acts, buf.l1_acts_sf,
                                 buf.l2_acts, buf.l2_acts_sf))
        outside = sum(lo < start or hi > end for lo, hi in spans)
        overlapping = sum(spans[i][1] > spans[i + 1][0] for i in range(len(spans) - 1))
        return torch.tensor([float(outside + overlapping)])

    cases.append(Case("get_symm_buffer_for_mega_moe", buffer_views_misplaced, lambda: torch.zeros(1), 0.0,
                      "max_abs"))

    la, lb = randn(256, 128), randn(2, 128, 128)
    l_ids = torch.arange(2, device=device, dtype=torch.int32).repeat_interleave(128)
    ld = torch.empty(256, 128, device=device, dtype=torch.bfloat16)
    cases.append(Case("legacy.m_grouped_bf16_gemm_nt_contiguous_tl",
                      lambda: (deep_gemm.legacy.m_grouped_bf16_gemm_nt_contiguous_tl(la, lb, ld, l_ids), ld)[1],
                      lambda: torch.cat([la[:128].double() @ lb[0].double().T, la[128:].double() @ lb[1].double().T]),
                      BF16_TOL))

    sf = torch.rand(300, 7, generator=g).to(device)
    cases.append(Case("get_mn_major_tma_aligned_tensor",
                      lambda: deep_gemm.get_mn_major_tma_aligned_tensor(sf), lambda: sf.double(), 0.0, "max_abs"))
    cases += _newer_cases(device, g, randn)
    return cases


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitudes of the 3-bit E2M1 codes; bit 3 is the sign


def _e2m1(packed: torch.Tensor) -> torch.Tensor:
    """float64 [rows, 2 * bytes] of packed E2M1 pairs (the even element in the low nibble)."""
    table = torch.tensor([(-1.0 if c & 8 else 1.0) * E2M1[c & 7] for c in range(16)], dtype=torch.float64,
                         device=packed.device)
    codes = packed.view(torch.uint8).long()
    return torch.stack([table[codes & 15], table[codes >> 4]], dim=-1).flatten(-2)


def _newer_cases(device: str, g: torch.Generator, randn) -> list[Case]:
    """The families DeepGEMM 0.2.3.post2 added: FP4 GEMMs, symmetric products, block-sparse MQA and the MQA
    schedule, the fused MoE gate, mega_mhc and the SM90 FP8 Mega MoE layer."""
    cases = []

    # K-grouped FP4 (E2M1, one power-of-two scale per row per 32 K)
    fm, fn, ks = 64, 96, [64, 0, 96]
    fa = torch.randint(-128, 128, (fm, sum(ks) // 2), generator=g, dtype=torch.int8).to(device)
    fb = torch.randint(-128, 128, (fn, sum(ks) // 2), generator=g, dtype=torch.int8).to(device)
    fsa = torch.exp2(torch.randint(-3, 4, (sum(ks) // 32, fm), generator=g).float()).to(device)
    fsb = torch.exp2(torch.randint(-3, 4, (sum(ks) // 32, fn), generator=g).float()).to(device)
    fd = torch.empty(len(ks), fm, fn, device=device)
    fks = torch.tensor(ks, dtype=torch.int32, device=device)

    def fp4_oracle():
        av = (_e2m1(fa) * fsa.double().T.repeat_interleave(32, dim=1)).T
        bv = (_e2m1(fb) * fsb.double().T.repeat_interleave(32, dim=1)).T
        out, start = [], 0
        for k_size in ks:
            out.append(av[start:start + k_size].T @ bv[start:start + k_size])
            start += k_size
        return torch.stack(out)

    cases.append(Case("k_grouped_fp4_gemm_nt_contiguous",
                      lambda: (deep_gemm.k_grouped_fp4_gemm_nt_contiguous((fa, fsa), (fb, fsb), fd, ks, fks), fd)[1],
                      fp4_oracle, BF16_TOL))

    sa = randn(3, 96, 256)
    sd = torch.empty(3, 96, 96, device=device, dtype=torch.bfloat16)
    cases.append(Case("batched_syrk", lambda: (deep_gemm.batched_syrk(sa, sd), sd)[1],
                      lambda: sa.double() @ sa.double().transpose(1, 2), BF16_TOL))

    # block-sparse MQA logits: 32 heads x 128, FP8 q and keys with UE8M0 scale words, 8-token blocks
    nq, num_kv, sbk = 4, 64, 8
    sq = (torch.randn(nq, 32, 128, generator=g) * 2).to(torch.float8_e4m3fn).to(device)
    skv = (torch.randn(num_kv, 128, generator=g) * 2).to(torch.float8_e4m3fn).to(device)
    sq_sf = torch.full((nq, 32), 0x7F7F7F7F, dtype=torch.int32, device=device)   # scale 1 in every byte
    skv_word = torch.tensor([127, 127, 128, 128], dtype=torch.uint8).view(torch.int32)  # scales 1, 1, 2, 2
    skv_sf = skv_word.expand(num_kv).contiguous().to(device)
    sw = randn(nq, 32)
    s_ks = torch.zeros(nq, dtype=torch.int32, device=device)
    s_ke = torch.full((nq,), num_kv, dtype=torch.int32, device=device)
    blocks = torch.tensor([[0, 2, 5, 7], [1, 3, 4, 6], [0, 1, 2, 3], [4, 5, 6, 7]], dtype=torch.int32, device=device)

    def sparse():
        meta = deep_gemm.get_sparse_mqa_logits_metadata(s_ks, s_ke, num_kv, blocks, torch.float8_e4m3fn, sbk)
        return deep_gemm.fp8_fp4_sparse_mqa_logits((sq, sq_sf), (skv, skv_sf), sw, meta, 4, sbk)

    def sparse_oracle():
        keys = skv.double() * torch.tensor([1.0] * 64 + [2.0] * 64, dtype=torch.float64, device=device)
        tokens = (blocks.long()[:, :, None] * sbk + torch.arange(sbk, device=device)).reshape(nq, -1)
        scores = torch.einsum("qhd,qcd->qhc", sq.double(), keys[tokens]).clamp(min=0)
        return torch.einsum("qhc,qh->qc", scores, sw.double())

    cases.append(Case("fp8_fp4_sparse_mqa_logits", sparse, sparse_oracle, BF16_TOL))

    # the MQA logits schedule: exact, against the CPU reference's words
    from deep_gemm.attention.metadata.reference import get_mqa_logits_metadata_reference
    m_ks = torch.randint(0, 3000, (300,), generator=g, dtype=torch.int32)
    m_ke = (m_ks + torch.randint(0, 2000, (300,), generator=g, dtype=torch.int32)).clamp(max=4096)
    cases.append(Case("get_mqa_logits_metadata",
                      lambda: deep_gemm.get_mqa_logits_metadata(m_ks.to(device), m_ke.to(device), 4096, 64),
                      lambda: get_mqa_logits_metadata_reference(m_ks, m_ke, 4096, 64).to(device), 0.0, "max_abs"))

    # the fused MoE gate: sigmoid scores, biased top-4 of 64, weights over their sum; compared as a dense
    # [tokens, experts] weight matrix
    gx, gw, gbias = randn(48, 512), randn(64, 512) * 0.05, (torch.randn(64, generator=g) * 0.1).to(device)

    def gate():
        idx, w = deep_gemm.bf16_mega_gate(gx, gw, 4, False, 1, 2.5, 0, scoring_func="sigmoid", bias=gbias)
        return torch.zeros(48, 64, device=device).scatter(1, idx, w)

    def gate_oracle():
        scores = torch.sigmoid(gx.double() @ gw.double().T)
        top = (scores + gbias.double()).topk(4, dim=1).indices
        picked = scores.gather(1, top)
        return torch.zeros(48, 64, dtype=torch.float64, device=device).scatter(
            1, top, picked / picked.sum(1, keepdim=True) * 2.5)

    cases.append(Case("bf16_mega_gate", gate, gate_oracle, 1e-4, "max_abs"))

    # mega_mhc: the next layer's RMSNorm'd input (4 routes, hidden 1024)
    t, r, h = 16, 4, 1024
    mx, mres = randn(t, h), randn(t, r, h)
    post = torch.rand(t, r, 1, generator=g).to(device)
    comb = torch.rand(t, r, r, generator=g).to(device)
    mfn = (torch.randn(24, r * h, generator=g) * 0.02).to(device)
    scales = (torch.rand(3, generator=g) + 0.5).to(device)
    bases = (torch.randn(24, generator=g) * 0.1).to(device)
    mweight = (torch.rand(h, generator=g) + 0.5).to(torch.bfloat16).to(device)
    outs = dict(new_residual=torch.empty(t, r, h, dtype=torch.bfloat16, device=device), new_prev_mix=None,
                new_post_mix=torch.empty(t, r, 1, device=device), new_comb_res_mix=torch.empty(t, r, r, device=device),
                y_bf16=torch.empty(t, h, dtype=torch.bfloat16, device=device))

    def mhc():
        deep_gemm.mega_mhc(mx, mres, None, post, comb, mfn, scales, bases, 4, 1e-6, 1e-2, 2.0, 1e-6, 20, mweight,
                           1e-6, 1.0, **outs)
        return outs["y_bf16"]

    def mhc_oracle():
        mixed = post.double() * mx.double()[:, None] + (comb.double()[:, :, :, None] * mres.double()[:, :, None]).sum(1)
        nr = mixed.to(torch.bfloat16).double()
        flat = nr.reshape(t, -1)
        rms = torch.rsqrt((flat * flat).mean(1, keepdim=True) + 1e-6)
        pre = torch.sigmoid((flat @ mfn.double()[:r].T) * rms * scales.double()[0] + bases.double()[:r]) + 1e-2
        u = (pre[:, :, None] * nr).sum(1).to(torch.bfloat16).double()
        return u * torch.rsqrt((u * u).mean(1, keepdim=True) + 1e-6) * mweight.double()

    cases.append(Case("mega_mhc", mhc, mhc_oracle, BF16_TOL))

    # the SM90 FP8 Mega MoE layer at one rank: pre-dispatch, then dispatch, L1 + SwiGLU, L2 and combine
    experts, hidden, inter, topk, tokens = 8, 256, 128, 2, 24
    w1 = torch.randn(experts, 2 * inter, hidden, generator=g) / 16
    w2 = torch.randn(experts, hidden, inter, generator=g) / 11
    q1 = [per_block_cast_to_fp8(w.to(device), use_ue8m0=False) for w in w1]
    q2 = [per_block_cast_to_fp8(w.to(device), use_ue8m0=False) for w in w2]
    l1 = (torch.stack([q for q, _ in q1]), torch.stack([s for _, s in q1]))
    l2 = (torch.stack([q for q, _ in q2]), torch.stack([s for _, s in q2]))
    l1t, l2t = deep_gemm.transform_weights_for_mega_moe_sm90(l1, l2)
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, experts, tokens, topk, hidden, inter, device=device)
    moe_x = randn(tokens, hidden)
    moe_idx = torch.rand(tokens, experts, generator=g).argsort(dim=1)[:, :topk].to(device)
    moe_w = (torch.rand(tokens, topk, generator=g) + 0.25).to(device)
    moe_y = torch.empty(tokens, hidden, dtype=torch.bfloat16, device=device)

    def moe():
        deep_gemm.mega_moe_pre_dispatch_sm90(moe_x, moe_idx, moe_w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights,
                                             num_tokens=tokens)
        deep_gemm.fp8_mega_moe(moe_y, l1t, l2t, buf, activation_clamp=10.0)
        return moe_y

    def moe_oracle():
        def dequant(pair):
            q, sf = pair
            return q.double() * sf.double().repeat_interleave(128, 1).repeat_interleave(128, 2)
        d1, d2 = dequant(l1), dequant(l2)
        out = torch.zeros(tokens, hidden, dtype=torch.float64, device=device)
        for tok in range(tokens):
            for slot in range(topk):
                e = int(moe_idx[tok, slot])
                hid = d1[e] @ moe_x[tok].double()
                gate_v, up = hid[:inter].clamp(max=10.0), hid[inter:].clamp(-10.0, 10.0)
                out[tok] += float(moe_w[tok, slot]) * (d2[e] @ (gate_v * torch.sigmoid(gate_v) * up))
        return out

    cases.append(Case("fp8_mega_moe", moe, moe_oracle, MEGA_FP8_TOL))
    return cases


def _error(case: Case, got: torch.Tensor, expected: torch.Tensor) -> float:
    if case.metric == "max_abs":
        return float((got.double() - expected.double()).abs().max()) if got.numel() else 0.0
    return calc_diff(got, expected)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deep_gemm",
        description="Self-check: run every deep_gemm op family once on the best available device (CUDA if present, "
                    "else the CPU reference) and compare each result with an independent float64 computation.",
        epilog="Error column: calc_diff(got, expected) = 1 - 2 sum(x y) / sum(x^2 + y^2) for products (DeepGEMM's "
               "metric); the largest absolute difference for exact ops. Exit status 1 if a case is out of tolerance.")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="run on this device (default: cuda when available)")
    args = parser.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    backends = deep_gemm.backends()
    print(f"deep_gemm {deep_gemm.__version__} on {torch.cuda.get_device_name() if device == 'cuda' else 'CPU'} "
          f"(torch {torch.__version__})")
    print("Legend, error: calc_diff vs a float64 computation for products, max |difference| for exact ops (see --help)")
    header = f"{'op':44s} {'backend':14s} {'device':6s} {'error vs fp64':>14s} {'time':>10s}  ok"
    print(header)
    print("-" * len(header))
    failures = 0
    for case in _cases(device):
        got = case.run()  # first call: compiles kernels on CUDA
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        got = case.run()
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        error = _error(case, got, case.oracle())
        ok = error <= case.tol
        failures += not ok
        backend = backends.get(case.name, "triton" if case.name.startswith("legacy.") else "host")
        # (a family awaiting its GPU run reports "triton (opt-in: ...)": its calls here run the reference)
        backend = ("reference" if "opt-in" in backend else backend.split(" ")[0]) if device == "cuda" \
            else "cpu reference"
        verdict = "yes" if ok else "NO"
        print(f"{case.name:44s} {backend:14s} {device:6s} {error:14.2e} {elapsed * 1e6:8.0f}us  {verdict}")
    print(f"\n{len(backends)} ops registered; CUDA backends: "
          f"{sum(v.startswith('triton') for v in backends.values())} triton, "
          f"{sum(v == 'reference' for v in backends.values())} torch reference, "
          f"{sum(v == 'host' for v in backends.values())} host-only")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
