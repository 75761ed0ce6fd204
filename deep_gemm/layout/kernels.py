"""Scale-factor layout kernels (tl.*): bit-exact copies and UE8M0 packs into the MN-major layouts the GEMMs read.

* ``_mn_major_copy_kernel``: out[g, r, c] = sf[g, r, c] for any input strides, output MN-major (unit stride along r).
  Program (r block, c block, g) loads a [BR, BC] tile and stores it; Triton's coalescing pass stages the tile
  through shared memory when the input is K-contiguous, so both sides are coalesced. 4-byte elements are moved as
  int32 (FP32 scales or packed UE8M0 words alike: bit-exact).
* ``_pack_ue8m0_kernel``: out[g, r, i] = sum_j ((bits(sf[g, r, 4i + j]) >> 23) & 0xFF) << 8j over the columns
  4i + j < SFK (the biased exponent byte of each FP32 scale, four per int32, little-endian), output MN-major.
* ``_k_grouped_pack_kernel``: K-grouped scales [sum SFK_g, MN] (groups stacked along rows): packed row p belongs to
  the group whose packed range covers it (group sizes from the device layout tensor: K sizes or psum ends,
  prefix-summed here, so nothing syncs); its slot j is SF row ``sf_start_g + 4 (p - packed_start_g) + j`` when
  inside the group, else 0.
"""

import triton
import triton.language as tl

_MANTISSA_BITS = tl.constexpr(23)
_EXPONENT_BYTE = tl.constexpr(0xFF)


@triton.jit(do_not_specialize=["R", "C", "stride_g", "stride_r", "stride_c", "out_stride_g", "out_stride_c"],
            do_not_specialize_on_alignment=["sf_ptr", "out_ptr"])
def _mn_major_copy_kernel(sf_ptr, out_ptr, R, C, stride_g, stride_r, stride_c, out_stride_g, out_stride_c,
                          BR: tl.constexpr, BC: tl.constexpr, C_UNIT: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    g = tl.program_id(2).to(tl.int64)
    rs = pid_r * BR + tl.arange(0, BR)
    cs = pid_c * BC + tl.arange(0, BC)
    mask = (rs[:, None] < R) & (cs[None, :] < C)
    if C_UNIT:  # K-contiguous input (stated, so the load is coalesced along c and the tile transposed on chip)
        cols = cs[None, :].to(tl.int64)
    else:
        cols = cs[None, :].to(tl.int64) * stride_c
    tile = tl.load(sf_ptr + g * stride_g + rs[:, None].to(tl.int64) * stride_r + cols, mask=mask)
    tl.store(out_ptr + g * out_stride_g + rs[:, None] + cs[None, :].to(tl.int64) * out_stride_c, tile, mask=mask)


@triton.jit
def _exponent_byte(bits):
    return (bits >> _MANTISSA_BITS) & _EXPONENT_BYTE


@triton.jit(do_not_specialize=["R", "SFK", "PACKED", "stride_g", "stride_r", "stride_c", "out_stride_g",
                               "out_stride_c"],
            do_not_specialize_on_alignment=["sf_ptr", "out_ptr"])
def _pack_ue8m0_kernel(sf_ptr, out_ptr, R, SFK, PACKED, stride_g, stride_r, stride_c, out_stride_g, out_stride_c,
                       BR: tl.constexpr, BI: tl.constexpr, C_UNIT: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_i = tl.program_id(1)
    g = tl.program_id(2).to(tl.int64)
    rs = pid_r * BR + tl.arange(0, BR)
    its = pid_i * BI + tl.arange(0, BI)
    row_ok = rs < R
    base = sf_ptr + g * stride_g + rs[:, None].to(tl.int64) * stride_r
    packed = tl.zeros((BR, BI), dtype=tl.int32)
    for j in tl.static_range(4):
        col = its * 4 + j
        ok = row_ok[:, None] & (col < SFK)[None, :]
        if C_UNIT:
            at = base + col[None, :].to(tl.int64)
        else:
            at = base + col[None, :].to(tl.int64) * stride_c
        bits = tl.load(at, mask=ok, other=0.0).to(tl.int32, bitcast=True)
        packed |= _exponent_byte(bits) << (8 * j)
    out = out_ptr + g * out_stride_g + rs[:, None] + its[None, :].to(tl.int64) * out_stride_c
    tl.store(out, packed, mask=row_ok[:, None] & (its < PACKED)[None, :])


@triton.jit(do_not_specialize=["ROWS", "MN", "NUM_SF_ROWS", "NUM_GROUPS", "GRAN_K", "K_ALIGNMENT"],
            do_not_specialize_on_alignment=["sf_ptr", "layout_ptr", "out_ptr"])
def _k_grouped_pack_kernel(sf_ptr, layout_ptr, out_ptr, ROWS, MN, NUM_SF_ROWS, NUM_GROUPS, GRAN_K, K_ALIGNMENT,
                           USE_PSUM: tl.constexpr, G_PAD: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    gs = tl.arange(0, G_PAD)
    g_ok = gs < NUM_GROUPS
    layout = tl.load(layout_ptr + gs, mask=g_ok, other=0).to(tl.int64)
    if USE_PSUM:
        previous = tl.load(layout_ptr + gs - 1, mask=g_ok & (gs > 0), other=0).to(tl.int64)
        start = (previous + K_ALIGNMENT - 1) // K_ALIGNMENT * K_ALIGNMENT
        group_k = tl.maximum(layout - start, 0)
    else:
        group_k = tl.maximum(layout, 0)
    group_k = tl.where(g_ok, group_k, 0)
    sf_rows = (group_k + GRAN_K - 1) // GRAN_K
    packed_rows = (sf_rows + 3) // 4
    sf_start = tl.cumsum(sf_rows, axis=0) - sf_rows
    packed_end = tl.cumsum(packed_rows, axis=0)
    packed_start = packed_end - packed_rows

    ps = pid_p * BP + tl.arange(0, BP)
    # Owner: the first group whose packed range ends after p (groups past NUM_GROUPS end at the total: never owners).
    ends_after = (packed_end[None, :] > ps[:, None]) & g_ok[None, :]
    owner = tl.min(tl.where(ends_after, gs[None, :], G_PAD), axis=1)
    owned = owner < NUM_GROUPS
    pick = gs[None, :] == owner[:, None]
    own_packed_start = tl.sum(tl.where(pick, packed_start[None, :], 0), axis=1)
    own_sf_start = tl.sum(tl.where(pick, sf_start[None, :], 0), axis=1)
    own_sf_rows = tl.sum(tl.where(pick, sf_rows[None, :], 0), axis=1)

    cs = pid_c * BC + tl.arange(0, BC)
    c_ok = cs < MN
    packed = tl.zeros((BP, BC), dtype=tl.int32)
    for j in tl.static_range(4):
        slot = (ps - own_packed_start) * 4 + j
        src = own_sf_start + slot
        ok = owned & (slot < own_sf_rows) & (src < NUM_SF_ROWS) & (ps < ROWS)
        bits = tl.load(sf_ptr + src[:, None] * MN + cs[None, :], mask=ok[:, None] & c_ok[None, :],
                       other=0.0).to(tl.int32, bitcast=True)
        packed |= _exponent_byte(bits) << (8 * j)
    out = out_ptr + ps[:, None].to(tl.int64) * MN + cs[None, :]
    tl.store(out, packed, mask=(ps < ROWS)[:, None] & c_ok[None, :])
