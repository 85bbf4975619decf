#!/usr/bin/env python3
# v4flash-plan.py: what coli-plan predicts for DeepSeek V4 Flash (43 layers of 256 experts) on a
# 28/32/57/64 GiB budget, for a machine where its container cannot be made: the full container
# is 147 GB of expert records at 4.25 bits (554 GB at bf16, what today's converter writes for the
# FP4 experts), and coli-plan reads a container. This is coli-plan's cost model (plan/cost.c: the
# expert products, the dense matrices, the attention core of engine/nn/attn_cost.c at position
# ctx/2, the disk reads per layer with the hash layers read ahead and no prediction for the
# family) evaluated term by term for Flash's widths, with the probe figures of docs/coli-plan.md
# (this machine, a quiet moment) and the simulator's uniform-routing hit rate, C / E for C
# records kept per layer (coli-plan on a 256-expert top-6 deepseek_v4 container: 99 kept -> 38.1%,
# 150 -> 59.1%, 249 -> 97.3%). The fixed part follows bench-v4's container (dense of the same
# widths, buffers 0.26 GiB) scaled to 43 layers. Run: python3 tests/bench/v4flash-plan.py
import math
GiB = 2**30
int4, mem, attn_rate = 33.2e9, 41.4e9, 16.48e9
qd_bps = {1: 1.694e9, 4: 1.353e9, 8: 1.196e9, 16: 1.182e9}; lat = 49e-6; qd_cap = 8
L, E, k, H, hd, W, topk, ih, ihd = 43, 256, 6, 64, 512, 128, 512, 64, 128
ratios = [0, 0] + [4 if i % 2 == 0 else 128 for i in range(2, 43)]
def disk_bps(q):
    ks = sorted(qd_bps)
    if q <= ks[0]: return qd_bps[ks[0]]
    for a, b in zip(ks, ks[1:]):
        if q <= b: return qd_bps[a] + (q - a) / (b - a) * (qd_bps[b] - qd_bps[a])
    return qd_bps[ks[-1]]
def read_time(m, rec):
    if m <= 0: return 0
    q = min(math.ceil(m), qd_cap); return m * rec / disk_bps(q)
att_w = sum(106.95e6 + (18.87e6 if r == 4 else 4.19e6 if r == 128 else 0) for r in ratios)
att = att_w * 4.25 / 8 / int4
rest = (L * 25.17e6 + 129280 * 4096) * 4.25 / 8 / int4 + (L * E * 4096 * 4 + L * 2 * 24 * 16384 * 4 + 21 * 64 * 4096 * 4 + 3 * 129280 * 6 * 4) / mem
def core(pos):
    keys = scanned = 0
    for r in ratios:
        rows = (pos + 1) // r if r else 0
        keys += min(pos + 1, W) + (min(rows, topk) if r == 4 else rows); scanned += rows if r == 4 else 0
    t = keys * H * 2 * hd / attn_rate + scanned * ih * ihd / (attn_rate * 2)
    return max(t, 4 * (keys * hd + scanned * ihd) / mem)
dense_gib = (att_w + L * 25.17e6 + 2 * 129280 * 4096) * 4.25 / 8 / GiB + 0.33
fixed = dense_gib + 0.18 + 0.05 + 0.26
def plan(ram, rec, bits_bps, ctx=4096, n_hash=3):
    cache = (ram - fixed) * GiB; per = min(E, int(cache / rec / (L + 1))); h = per / E
    x = k * rec / bits_bps; experts = L * x; a = att + core(ctx // 2); other = rest + 2e-6 * L
    cl = (att + rest) / L; disk = ahead = stalled = sust = 0
    for l in range(L):
        miss = k * (1 - h); d = read_time(miss, rec) + (lat if miss > 0 else 0)
        if l < n_hash:
            ahead += d; s = max(0, ahead - (cl + x) * l - cl - stalled); stalled += s
        else:
            s = max(0, d - x * h)
        disk += s; sust += read_time(miss, rec)
    comp = experts + a + other
    if comp + disk < sust: disk = sust - comp
    return dict(ram=ram, fixed=round(fixed, 2), cache_gib=round(cache / GiB, 2), per_layer=per, hit=round(h, 3),
                tok_s=round(1 / (comp + disk), 3), disk_ms=round(disk * 1e3, 1), experts_ms=round(experts * 1e3, 1),
                attn_ms=round(a * 1e3, 1), other_ms=round(other * 1e3, 1))
fp4 = 13369344          # 3 x 2048 x 4096 x 4.25 bits, 4096-aligned (= coli's int4 gs64 record)
bf16 = 3 * 2048 * 4096 * 2
for ram in (28, 32, 57, 64):
    print("fp4/int4", plan(ram, fp4, int4))
for ram in (32, 64):
    print("bf16    ", plan(ram, bf16, mem))
print("all in RAM (fp4)", plan(200, fp4, int4))
print("32K ctx at 64 GiB", plan(64, fp4, int4, ctx=65536))
print("fixed GiB", round(fixed, 2), "dense GiB", round(dense_gib, 2), "experts GB fp4", round(L * E * fp4 / 1e9, 1), "bf16", round(L * E * bf16 / 1e9, 1))
