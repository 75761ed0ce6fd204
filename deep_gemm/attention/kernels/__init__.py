"""Device code of the MQA-logits family (DeepSeek V3.2 indexer): prefill logits, the clean pass, paged decode
logits and the paged schedule. No allocation and no config logic here (``attention/launch.py`` does that).

Modules: ``common`` (FP4 unpacking, row loaders, the head-weighted reduction, non-coherent loads), ``prefill``
(prefill logits and the clean pass), ``paged`` (paged decode logits, its schedule, and the persistent form).

Orientation (all score kernels): KV rows on the MMA's M side, (query, head) pairs on N, so one ``tl.dot`` gives a
``[BLOCK_KV, ROWS * H]`` score tile whose head reduction stays inside a warp (the heads of one query are adjacent
columns): ``relu``, times the query's head weights, ``tl.sum`` over H, times the key's scale, store.
Each output element is written by exactly one program and reduced in a fixed order: results are bitwise identical
call to call (no atomics).

FP4 operands (packed E2M1, two values per byte with the even element in the low nibble, one UE8M0 exponent byte per
32 values packed four to an int32) are unpacked to FP32 in registers and scaled; E2M1 values times powers of two
are exact in BF16, so on the GPU the dot runs on BF16 operands with FP32 accumulation (the interpreter's BF16 dot
is wrong, so it gets FP32 operands: ``FP4_DOT_BF16``).

Kernel names matter: DeepGEMM's benchmarks find kernels by substring (``mqa_logits``, ``paged_mqa_logits``,
``clean_logits``), so exactly one kernel of each call matches each substring.
"""
