// Warp-tiled SGEMM (issue 15, second round): C = alpha * A * B + beta * C, row-major, any M, N, K, explicit
// leading dimensions. A generalisation of optimized_sgemm.cu's core to larger register tiles per thread, built
// to be timed against it (custom_plan.SGEMM_CONFIGS entries named "wt..."); its geometry is all -D defines:
//
//   * a block of WT_WARPS_M x WT_WARPS_N warps computes a WT_BM x WT_BN tile of C, walking K in steps of WT_BK;
//     each warp a (WT_BM / WT_WARPS_M) x (WT_BN / WT_WARPS_N) sub-tile, its 32 lanes as WT_LANES_M x
//     (32 / WT_LANES_M); each thread a TM x TN register tile made of (TM / 4) x (TN / 4) float4 quads, the
//     quads of one thread WT_LANES_M * 4 rows (resp. LN * 4 columns) apart (the SIMT layout of CUTLASS's
//     warp-level FFMA GEMM): per k a thread reads TM / 4 float4s of A and TN / 4 of B with LDS.128, and within
//     one load the warp touches WT_LANES_M (resp. LN) consecutive float4s, at most 128 bytes: broadcasts, no
//     bank conflicts. The default geometry (128 x 128, 2 x 2 warps of 64 x 64, 4 x 8 lanes) gives every
//     thread 16 x 8 outputs: 128 FFMAs per 6 LDS.128 (optimized_sgemm.cu's 8 x 8: 64 per 4), with 128
//     threads and two blocks per SM (__launch_bounds__(128, 2): up to 255 registers);
//   * pipeline exactly as optimized_sgemm.cu: a ring of WT_STAGES K-tiles in dynamic shared memory; B
//     global -> shared with 16-byte cp.async WT_STAGES - 1 tiles ahead (zero-filled past N and K); A global
//     -> registers one K-tile ahead, stored transposed (As[k][m], rows padded by 4 floats) with scalar STS
//     that hit 32 distinct banks per warp; one cp.async.wait_group + __syncthreads per K-tile; the fragments
//     of step k + 1 are read while step k's FFMAs run;
//   * 16-byte global accesses (template VEC) only when the host has checked A, B, C 16-byte aligned and
//     lda, ldb, ldc multiples of 4; edges and VEC = false fall back to guarded scalar ones;
//   * epilogue: alpha (and beta x old C, never read when beta == 0) in registers, one float4 per quad.
//
// Third-round options, each off by default (a build without them compiles to the code above):
//   * WT_FAST = 1: the K-tiles whose copies lie wholly inside the matrices (every K-tile but the last few when
//     the block's tile is inside M x N) run a copy of the loop without edge guards: plain 16-byte cp.async and
//     LDG.128, no per-copy predicates, selects or src-size arithmetic (VEC kernels only);
//   * WT_A_KMAJOR = 1: A stays k-contiguous in shared memory (As[m][k], rows padded to WT_BK + 4 floats) and is
//     copied like B, with 16-byte cp.async WT_STAGES - 1 tiles ahead: no register staging, no transposing STS.
//     A thread's rows are then WT_LANES_M apart (the lanes of a warp read WT_LANES_M consecutive rows: with
//     the padding, distinct banks), and per 4 k it reads each row's 4 k with one LDS.128 (TM per 4 k, as
//     many as the transposed layout) and B's 4 x TN / 4 float4s;
//   * WT_PIPE = 1 (transposed A only): the K-tile boundary moves into the last k step, as in CUTLASS's multistage
//     loop: once that step's fragments are in registers, A of the next K-tile is stored, the wait and the
//     barrier come, and the next K-tile's first fragments are read before the step's FFMAs, which cover their
//     latency (without it they are read after the barrier and the first FFMAs wait for them);
//   * WT_SWIZZLE = G > 1 (2-D kernels only): consecutive blocks walk G tile-rows down a column before moving
//     to the next column, so the blocks resident at one time share fewer, more reused A and B panels in L2.
//
// The core is a __device__ template: batched_sgemm.cu reuses it (batched_sgemm_wtiled_*, compiled only when
// the plan passes the WT_* defines); define GPUPERF_WT_CORE_ONLY before including this file to get the core.

#ifndef GPUPERF_WARP_SGEMM_CORE
#define GPUPERF_WARP_SGEMM_CORE

#ifndef GPUPERF_SGEMM_CORE_ONLY
#define GPUPERF_SGEMM_CORE_ONLY  // optimized_sgemm.cu's helpers (opt_load4, opt_copy4, opt_store4), not its kernels
#endif
#include "optimized_sgemm.cu"

#ifndef WT_BM
#define WT_BM 128
#endif
#ifndef WT_BN
#define WT_BN 128
#endif
#ifndef WT_BK
#define WT_BK 16
#endif
#ifndef WT_STAGES
#define WT_STAGES 3
#endif
#ifndef WT_WARPS_M
#define WT_WARPS_M 2
#endif
#ifndef WT_WARPS_N
#define WT_WARPS_N 2
#endif
#ifndef WT_LANES_M
#define WT_LANES_M 4
#endif
#ifndef WT_MIN_BLOCKS
#define WT_MIN_BLOCKS 2
#endif
#ifndef WT_FAST
#define WT_FAST 0
#endif
#ifndef WT_A_KMAJOR
#define WT_A_KMAJOR 0
#endif
#ifndef WT_SWIZZLE
#define WT_SWIZZLE 0
#endif
#ifndef WT_PIPE
#define WT_PIPE 0
#endif
#define WT_THREADS (32 * WT_WARPS_M * WT_WARPS_N)
#define WT_APAD 4
#define WT_A_PITCH (WT_BM + WT_APAD)
// Floats of one stage's A tile: transposed WT_BK x (WT_BM + 4), or with WT_A_KMAJOR WT_BM x (WT_BK + 4); B's WT_BK x
// WT_BN. The dynamic shared memory is WT_STAGES * (WT_A_STAGE + WT_B_STAGE) floats.
#define WT_A_STAGE ((1 - WT_A_KMAJOR) * WT_BK * WT_A_PITCH + WT_A_KMAJOR * WT_BM * (WT_BK + WT_APAD))
#define WT_B_STAGE (WT_BK * WT_BN)

static_assert(WT_LANES_M == 4 || WT_LANES_M == 8, "a warp's LDS.128 covers at most 128 bytes of A and of B");
static_assert(WT_BM % 32 == 0, "the padded A pitch is 4 mod 32 floats: the transposing stores hit 32 banks");
static_assert(WT_BK % 8 == 0, "the A loader covers 8 k per warp and load");
static_assert(WT_STAGES >= 2, "A is stored one K-tile ahead into the stage after the current one");
static_assert(WT_BK % 2 == 0, "the fragment sets alternate: the next K-tile's first step reads set 0");
static_assert(!(WT_PIPE && WT_A_KMAJOR), "WT_PIPE is the transposed-A core's");
static_assert(WT_SWIZZLE >= 0 && WT_SWIZZLE <= 64, "a group of WT_SWIZZLE tile-rows: local ids stay below 2^30");

template <bool B>
struct wt_bool {
    static constexpr bool value = B;
};

#if !WT_A_KMAJOR

// One WT_BM x WT_BN tile of C at (bm, bn); as opt_sgemm_tile, c_matrix() gives C's matrix in the epilogue only.
template <bool VEC, class CMatrix>
__device__ __forceinline__ void wt_sgemm_tile(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                                              const float* __restrict__ B, int ldb, float beta, CMatrix c_matrix,
                                              int ldc, int bm, int bn) {
    constexpr int LM = WT_LANES_M;       // lanes along the warp tile's rows
    constexpr int LN = 32 / WT_LANES_M;  // lanes along its columns
    constexpr int WTM = WT_BM / WT_WARPS_M;
    constexpr int WTN = WT_BN / WT_WARPS_N;
    constexpr int QM = WTM / (4 * LM);  // float4 quads of A per thread and k (rows TM = 4 QM)
    constexpr int QN = WTN / (4 * LN);  // float4 quads of B per thread and k (columns TN = 4 QN)
    constexpr int NW = WT_WARPS_M * WT_WARPS_N;
    constexpr int KB = WT_BK / 8;                              // A loader: 8-k slices of the tile
    constexpr int A_LOADS = WT_BM * WT_BK / (4 * WT_THREADS);  // float4s of A per thread and K-tile
    constexpr int A_ROW_STEP = 16 * NW / KB;                   // rows between a thread's A loads
    constexpr int B_CHUNKS = WT_BN / 4;                        // float4s per row of the B tile
    constexpr int B_LOADS = WT_BK * B_CHUNKS / WT_THREADS;     // float4s of B per thread and K-tile
    constexpr int B_ROW_STEP = WT_THREADS / B_CHUNKS;          // k rows between a thread's B copies
    static_assert(QM >= 1 && QN >= 1 && WTM == 4 * LM * QM && WTN == 4 * LN * QN, "whole quads per thread");
    static_assert(NW % KB == 0 && A_LOADS >= 1 && A_LOADS * A_ROW_STEP == WT_BM, "the A loader covers the tile once");
    static_assert(WT_THREADS % B_CHUNKS == 0 && B_LOADS >= 1 && B_LOADS * B_ROW_STEP == WT_BK,
                  "the B loader covers the tile once, one column per thread");

    extern __shared__ __align__(16) float wt_smem[];
    float* const As = wt_smem;                                    // [WT_STAGES][WT_BK][WT_A_PITCH]
    float* const Bs = wt_smem + WT_STAGES * WT_BK * WT_A_PITCH;  // [WT_STAGES][WT_BK][WT_BN]

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;

    // A loader: load i reads row a_row + i * A_ROW_STEP, k quad a_k .. a_k + 3. A warp covers 16 rows x 2 quads
    // (32 bytes of each row: whole sectors), and its transposed stores 16 rows x 8 k rows: 32 distinct banks.
    const int a_row = (warp / KB) * 16 + (lane & 15);
    const int a_k = (warp % KB) * 8 + ((lane >> 4) << 2);
    const float* a_src = A + (size_t)(bm + a_row) * lda + a_k;  // walks K with the fetches (read only when inside)
    const size_t a_step = (size_t)A_ROW_STEP * lda;
    // B loader: copy i of a thread is k row b_row + i * B_ROW_STEP, columns b_col .. b_col + 3.
    const int b_row = tid / B_CHUNKS;
    const int b_col = (tid % B_CHUNKS) * 4;
    const int b_avail = max(0, min(4, N - (bn + b_col)));  // columns of the thread's float4 inside the matrix
    const float* b_src = B + (size_t)b_row * ldb + bn + b_col;
    const size_t b_step = (size_t)B_ROW_STEP * ldb;

    auto load_b = [&](int stage, int k0) {  // K-tile at k0 into `stage`; b_src points at its row k0 + b_row
        float* dst = Bs + (stage * WT_BK + b_row) * WT_BN + b_col;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const bool row_ok = k0 + b_row + i * B_ROW_STEP < K;
            opt_copy4<VEC>(dst + i * B_ROW_STEP * WT_BN, b_src + i * b_step, row_ok ? b_avail : 0, B);
        }
        b_src += (size_t)WT_BK * ldb;
    };
    float4 ra[A_LOADS];
    auto fetch_a = [&](int k0) {  // K-tile at k0 into registers; a_src points at its column k0 + a_k
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i)
            ra[i] = opt_load4<VEC>(a_src + i * a_step, k0 + a_k, K, bm + a_row + i * A_ROW_STEP < M);
        a_src += WT_BK;
    };
    auto stash_a = [&](int stage) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            float* dst = As + (stage * WT_BK + a_k) * WT_A_PITCH + a_row + i * A_ROW_STEP;
            dst[0] = ra[i].x;
            dst[WT_A_PITCH] = ra[i].y;
            dst[2 * WT_A_PITCH] = ra[i].z;
            dst[3 * WT_A_PITCH] = ra[i].w;
        }
    };
    // WT_FAST: the same copies for a K-tile wholly inside K of a block wholly inside M x N (VEC): no guards.
    auto load_b_full = [&](int stage) {
        float* dst = Bs + (stage * WT_BK + b_row) * WT_BN + b_col;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) cp_async16(dst + i * B_ROW_STEP * WT_BN, b_src + i * b_step, 16);
        b_src += (size_t)WT_BK * ldb;
    };
    auto fetch_a_full = [&]() {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) ra[i] = *reinterpret_cast<const float4*>(a_src + i * a_step);
        a_src += WT_BK;
    };

    // This thread's quads: rows wm * WTM + q * 4 LM + lm * 4 + (0..3), columns wn * WTN + q * 4 LN + ln * 4 + (0..3).
    const int wm = warp / WT_WARPS_N;
    const int wn = warp % WT_WARPS_N;
    const int a_frag = wm * WTM + (lane / LN) * 4;
    const int b_frag = wn * WTN + (lane % LN) * 4;

    float acc[4 * QM][4 * QN];
#pragma unroll
    for (int i = 0; i < 4 * QM; ++i)
#pragma unroll
        for (int j = 0; j < 4 * QN; ++j) acc[i][j] = 0.f;

    const int ktiles = (K + WT_BK - 1) / WT_BK;
    // Prologue: B of K-tiles 0 .. STAGES-2 in flight, A of K-tile 0 in stage 0, A of K-tile 1 in registers.
#pragma unroll
    for (int s = 0; s < WT_STAGES - 1; ++s) {
        if (s < ktiles) load_b(s, s * WT_BK);
        cp_async_commit();
    }
    fetch_a(0);
    stash_a(0);
    if (ktiles > 1) fetch_a(WT_BK);
    cp_async_wait<WT_STAGES - 2>();
    __syncthreads();

    // Stages as in opt_sgemm_tile: `cur` is read now, `ahead` (= cur - 1) receives B of K-tile kt + STAGES - 1,
    // `next` (= cur + 1) receives A of K-tile kt + 1 after this K-tile's FFMAs.
    int cur = 0;
    int ahead = WT_STAGES - 1;
    int next = 1 % WT_STAGES;
#if !WT_FAST && !WT_PIPE
    for (int kt = 0; kt < ktiles; ++kt) {
        if (kt + WT_STAGES - 1 < ktiles) load_b(ahead, (kt + WT_STAGES - 1) * WT_BK);
        cp_async_commit();
        const float* as = As + cur * WT_BK * WT_A_PITCH + a_frag;
        const float* bs = Bs + cur * WT_BK * WT_BN + b_frag;
        float4 fa[2][QM], fb[2][QN];  // the fragments of step k (set k & 1) and of step k + 1
#pragma unroll
        for (int q = 0; q < QM; ++q) fa[0][q] = *reinterpret_cast<const float4*>(as + q * 4 * LM);
#pragma unroll
        for (int q = 0; q < QN; ++q) fb[0][q] = *reinterpret_cast<const float4*>(bs + q * 4 * LN);
#pragma unroll
        for (int k = 0; k < WT_BK; ++k) {
            const int now = k & 1;
            if (k + 1 < WT_BK) {
#pragma unroll
                for (int q = 0; q < QM; ++q)
                    fa[now ^ 1][q] = *reinterpret_cast<const float4*>(as + (k + 1) * WT_A_PITCH + q * 4 * LM);
#pragma unroll
                for (int q = 0; q < QN; ++q)
                    fb[now ^ 1][q] = *reinterpret_cast<const float4*>(bs + (k + 1) * WT_BN + q * 4 * LN);
            }
#pragma unroll
            for (int qm = 0; qm < QM; ++qm) {
                const float a[4] = {fa[now][qm].x, fa[now][qm].y, fa[now][qm].z, fa[now][qm].w};
#pragma unroll
                for (int qn = 0; qn < QN; ++qn) {
                    const float b[4] = {fb[now][qn].x, fb[now][qn].y, fb[now][qn].z, fb[now][qn].w};
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            acc[qm * 4 + i][qn * 4 + j] = fmaf(a[i], b[j], acc[qm * 4 + i][qn * 4 + j]);
                }
            }
        }
        if (kt + 1 < ktiles) {
            stash_a(next);
            if (kt + 2 < ktiles) fetch_a((kt + 2) * WT_BK);
        }
        cp_async_wait<WT_STAGES - 2>();  // B of K-tile kt + 1 has landed
        __syncthreads();
        cur = cur + 1 == WT_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == WT_STAGES ? 0 : ahead + 1;
        next = next + 1 == WT_STAGES ? 0 : next + 1;
    }
#else
    // One K-tile. FULL (WT_FAST): every copy of this iteration lies inside the matrices, none is guarded. WT_PIPE: the
    // K-tile boundary is moved into the last step: once its fragments are in registers, A of the next K-tile is
    // stored, the wait and the barrier come, and the first fragments of the next K-tile are read before the last
    // step's FFMAs, which cover their latency (without WT_PIPE they are read after the barrier, then waited for).
    float4 fa[2][QM], fb[2][QN];  // the fragments of step k (set k & 1) and of step k + 1
    auto load_frags = [&](int set, const float* as, const float* bs) {
#pragma unroll
        for (int q = 0; q < QM; ++q) fa[set][q] = *reinterpret_cast<const float4*>(as + q * 4 * LM);
#pragma unroll
        for (int q = 0; q < QN; ++q) fb[set][q] = *reinterpret_cast<const float4*>(bs + q * 4 * LN);
    };
    auto tile_end = [&](int kt, auto full) {  // A of K-tile kt + 1 stored, kt + 2 fetched; wait, barrier, next stage
        if (decltype(full)::value) {
            stash_a(next);
            fetch_a_full();
        } else if (kt + 1 < ktiles) {
            stash_a(next);
            if (kt + 2 < ktiles) fetch_a((kt + 2) * WT_BK);
        }
        cp_async_wait<WT_STAGES - 2>();  // B of K-tile kt + 1 has landed
        __syncthreads();
        cur = cur + 1 == WT_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == WT_STAGES ? 0 : ahead + 1;
        next = next + 1 == WT_STAGES ? 0 : next + 1;
    };
#if WT_PIPE
    load_frags(0, As + a_frag, Bs + b_frag);  // K-tile 0's first fragments (stage 0)
#endif
    auto k_tile = [&](int kt, auto full) {
        constexpr bool FULL = decltype(full)::value;
        if (FULL) {
            load_b_full(ahead);
        } else if (kt + WT_STAGES - 1 < ktiles) {
            load_b(ahead, (kt + WT_STAGES - 1) * WT_BK);
        }
        cp_async_commit();
        const float* as = As + cur * WT_BK * WT_A_PITCH + a_frag;
        const float* bs = Bs + cur * WT_BK * WT_BN + b_frag;
#if !WT_PIPE
        load_frags(0, as, bs);
#endif
#pragma unroll
        for (int k = 0; k < WT_BK; ++k) {
            const int now = k & 1;
            if (k + 1 < WT_BK) {
                load_frags(now ^ 1, as + (k + 1) * WT_A_PITCH, bs + (k + 1) * WT_BN);
            } else if (WT_PIPE) {
                tile_end(kt, full);
                if (FULL || kt + 1 < ktiles)
                    load_frags(now ^ 1, As + cur * WT_BK * WT_A_PITCH + a_frag, Bs + cur * WT_BK * WT_BN + b_frag);
            }
#pragma unroll
            for (int qm = 0; qm < QM; ++qm) {
                const float a[4] = {fa[now][qm].x, fa[now][qm].y, fa[now][qm].z, fa[now][qm].w};
#pragma unroll
                for (int qn = 0; qn < QN; ++qn) {
                    const float b[4] = {fb[now][qn].x, fb[now][qn].y, fb[now][qn].z, fb[now][qn].w};
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            acc[qm * 4 + i][qn * 4 + j] = fmaf(a[i], b[j], acc[qm * 4 + i][qn * 4 + j]);
                }
            }
        }
        if (!WT_PIPE) tile_end(kt, full);
    };
    int kt = 0;
#if WT_FAST
    if constexpr (VEC) {
        // K-tiles kt < fast_end: B of kt + STAGES - 1 and A of kt + 2 lie wholly inside K; the tile inside M x N.
        constexpr int LEAD = WT_STAGES > 3 ? WT_STAGES : 3;
        const int fast_end = bm + WT_BM <= M && bn + WT_BN <= N ? max(0, K / WT_BK - LEAD + 1) : 0;
        for (; kt < fast_end; ++kt) k_tile(kt, wt_bool<true>());
    }
#endif
    for (; kt < ktiles; ++kt) k_tile(kt, wt_bool<false>());
#endif  // WT_FAST || WT_PIPE

#pragma unroll
    for (int qm = 0; qm < QM; ++qm) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = bm + a_frag + qm * 4 * LM + i;
            if (row < M) {
                float* c_row = c_matrix() + (size_t)row * ldc;
#pragma unroll
                for (int qn = 0; qn < QN; ++qn) {
                    const float* r = acc[qm * 4 + i] + qn * 4;
                    const float4 v = make_float4(alpha * r[0], alpha * r[1], alpha * r[2], alpha * r[3]);
                    opt_store4<VEC>(c_row, bn + b_frag + qn * 4 * LN, N, v, beta);
                }
            }
        }
    }
}

#else  // WT_A_KMAJOR

// The same tile with A k-contiguous in shared memory (WT_A_KMAJOR): both operands global -> shared with cp.async,
// WT_STAGES - 1 K-tiles ahead, one group per K-tile; no registers hold a K-tile in flight.
template <bool VEC, class CMatrix>
__device__ __forceinline__ void wt_sgemm_tile(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                                              const float* __restrict__ B, int ldb, float beta, CMatrix c_matrix,
                                              int ldc, int bm, int bn) {
    constexpr int LM = WT_LANES_M;
    constexpr int LN = 32 / WT_LANES_M;
    constexpr int WTM = WT_BM / WT_WARPS_M;
    constexpr int WTN = WT_BN / WT_WARPS_N;
    constexpr int QM = WTM / (4 * LM);
    constexpr int QN = WTN / (4 * LN);
    constexpr int TM = 4 * QM;                              // rows per thread, LM apart
    constexpr int AP = WT_BK + WT_APAD;                     // A row pitch: 4 mod 8 floats, LM consecutive rows on
                                                            // distinct 16-byte bank groups
    constexpr int CH = WT_BK / 4;                           // float4 chunks of k per row of the A tile
    constexpr int A_LOADS = WT_BM * CH / WT_THREADS;        // float4s of A per thread and K-tile
    constexpr int A_ROW_STEP = WT_THREADS / CH;             // rows between a thread's A copies
    constexpr int B_CHUNKS = WT_BN / 4;
    constexpr int B_LOADS = WT_BK * B_CHUNKS / WT_THREADS;
    constexpr int B_ROW_STEP = WT_THREADS / B_CHUNKS;
    static_assert(QM >= 1 && QN >= 1 && WTM == TM * LM && WTN == 4 * LN * QN, "whole quads per thread");
    static_assert(WT_THREADS % CH == 0 && A_LOADS >= 1 && A_LOADS * A_ROW_STEP == WT_BM,
                  "the A loader covers the tile once, one k chunk per thread");
    static_assert(WT_THREADS % B_CHUNKS == 0 && B_LOADS >= 1 && B_LOADS * B_ROW_STEP == WT_BK,
                  "the B loader covers the tile once, one column per thread");
    static_assert(WT_A_STAGE == WT_BM * AP, "the host sizes the A tile as this layout");

    extern __shared__ __align__(16) float wt_smem[];
    float* const As = wt_smem;                                // [WT_STAGES][WT_BM][AP]
    float* const Bs = wt_smem + WT_STAGES * WT_BM * AP;       // [WT_STAGES][WT_BK][WT_BN]

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;

    // A loader: copy i of a thread is row a_row + i * A_ROW_STEP, k a_c .. a_c + 3 of the K-tile (CH consecutive
    // threads cover a row's WT_BK floats: whole 32-byte sectors).
    const int a_row = tid / CH;
    const int a_c = (tid % CH) * 4;
    const float* a_src = A + (size_t)(bm + a_row) * lda + a_c;  // walks K with the copies (read only when inside)
    const size_t a_step = (size_t)A_ROW_STEP * lda;
    // B loader as the transposed core's.
    const int b_row = tid / B_CHUNKS;
    const int b_col = (tid % B_CHUNKS) * 4;
    const int b_avail = max(0, min(4, N - (bn + b_col)));
    const float* b_src = B + (size_t)b_row * ldb + bn + b_col;
    const size_t b_step = (size_t)B_ROW_STEP * ldb;

    auto load_a = [&](int stage, int k0) {  // K-tile at k0 into `stage`; a_src points at its column k0 + a_c
        float* dst = As + (stage * WT_BM + a_row) * AP + a_c;
        const int k_avail = max(0, min(4, K - (k0 + a_c)));
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const bool row_ok = bm + a_row + i * A_ROW_STEP < M;
            opt_copy4<VEC>(dst + i * A_ROW_STEP * AP, a_src + i * a_step, row_ok ? k_avail : 0, A);
        }
        a_src += WT_BK;
    };
    auto load_b = [&](int stage, int k0) {
        float* dst = Bs + (stage * WT_BK + b_row) * WT_BN + b_col;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const bool row_ok = k0 + b_row + i * B_ROW_STEP < K;
            opt_copy4<VEC>(dst + i * B_ROW_STEP * WT_BN, b_src + i * b_step, row_ok ? b_avail : 0, B);
        }
        b_src += (size_t)WT_BK * ldb;
    };
    // WT_FAST: the same copies for a K-tile wholly inside K of a block wholly inside M x N (VEC): no guards.
    auto load_full = [&](int stage) {
        float* a_dst = As + (stage * WT_BM + a_row) * AP + a_c;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) cp_async16(a_dst + i * A_ROW_STEP * AP, a_src + i * a_step, 16);
        a_src += WT_BK;
        float* b_dst = Bs + (stage * WT_BK + b_row) * WT_BN + b_col;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) cp_async16(b_dst + i * B_ROW_STEP * WT_BN, b_src + i * b_step, 16);
        b_src += (size_t)WT_BK * ldb;
    };

    // This thread's rows: a_frag + r * LM (r < TM); columns as the transposed core's.
    const int wm = warp / WT_WARPS_N;
    const int wn = warp % WT_WARPS_N;
    const int a_frag = wm * WTM + lane / LN;
    const int b_frag = wn * WTN + (lane % LN) * 4;

    float acc[TM][4 * QN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < 4 * QN; ++j) acc[i][j] = 0.f;

    const int ktiles = (K + WT_BK - 1) / WT_BK;
    // Prologue: K-tiles 0 .. STAGES-2 in flight, one group each.
#pragma unroll
    for (int s = 0; s < WT_STAGES - 1; ++s) {
        if (s < ktiles) {
            load_a(s, s * WT_BK);
            load_b(s, s * WT_BK);
        }
        cp_async_commit();
    }
    cp_async_wait<WT_STAGES - 2>();
    __syncthreads();

    // `cur` is read now; `ahead` (= cur - 1) receives K-tile kt + STAGES - 1 (it was read in iteration kt - 1, and
    // every thread is past that since the last barrier).
    int cur = 0;
    int ahead = WT_STAGES - 1;
    auto k_tile = [&](int kt, auto full) {
        constexpr bool FULL = decltype(full)::value;
        if (FULL) {
            load_full(ahead);
        } else if (kt + WT_STAGES - 1 < ktiles) {
            load_a(ahead, (kt + WT_STAGES - 1) * WT_BK);
            load_b(ahead, (kt + WT_STAGES - 1) * WT_BK);
        }
        cp_async_commit();
        const float* as = As + (cur * WT_BM + a_frag) * AP;
        const float* bs = Bs + cur * WT_BK * WT_BN + b_frag;
        float4 fb[2][4][QN];  // B of the 4 k of chunk c (set c & 1) and of chunk c + 1
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int q = 0; q < QN; ++q) fb[0][kk][q] = *reinterpret_cast<const float4*>(bs + kk * WT_BN + q * 4 * LN);
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            const int now = c & 1;
            if (c + 1 < CH) {
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                    for (int q = 0; q < QN; ++q)
                        fb[now ^ 1][kk][q] =
                            *reinterpret_cast<const float4*>(bs + (4 * (c + 1) + kk) * WT_BN + q * 4 * LN);
            }
#pragma unroll
            for (int r = 0; r < TM; ++r) {
                const float4 av = *reinterpret_cast<const float4*>(as + r * LM * AP + 4 * c);
                const float a[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                    for (int qn = 0; qn < QN; ++qn) {
                        const float b[4] = {fb[now][kk][qn].x, fb[now][kk][qn].y, fb[now][kk][qn].z,
                                            fb[now][kk][qn].w};
#pragma unroll
                        for (int j = 0; j < 4; ++j) acc[r][qn * 4 + j] = fmaf(a[kk], b[j], acc[r][qn * 4 + j]);
                    }
            }
        }
        cp_async_wait<WT_STAGES - 2>();  // K-tile kt + 1 has landed
        __syncthreads();
        cur = cur + 1 == WT_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == WT_STAGES ? 0 : ahead + 1;
    };
    int kt = 0;
#if WT_FAST
    if constexpr (VEC) {
        // K-tiles kt < fast_end: K-tile kt + STAGES - 1 lies wholly inside K; the tile inside M x N.
        const int fast_end = bm + WT_BM <= M && bn + WT_BN <= N ? max(0, K / WT_BK - WT_STAGES + 1) : 0;
        for (; kt < fast_end; ++kt) k_tile(kt, wt_bool<true>());
    }
#endif
    for (; kt < ktiles; ++kt) k_tile(kt, wt_bool<false>());

#pragma unroll
    for (int r = 0; r < TM; ++r) {
        const int row = bm + a_frag + r * LM;
        if (row < M) {
            float* c_row = c_matrix() + (size_t)row * ldc;
#pragma unroll
            for (int qn = 0; qn < QN; ++qn) {
                const float* v4 = acc[r] + qn * 4;
                const float4 v = make_float4(alpha * v4[0], alpha * v4[1], alpha * v4[2], alpha * v4[3]);
                opt_store4<VEC>(c_row, bn + b_frag + qn * 4 * LN, N, v, beta);
            }
        }
    }
}

#endif  // WT_A_KMAJOR

// The block's tile of C: row tile blockIdx.y, column tile blockIdx.x; with WT_SWIZZLE = G > 1 the linear block id
// (blockIdx.y * gridDim.x + blockIdx.x, the order blocks are started in) walks G tile-rows down a column, then the
// next column, group of G tile-rows after group (the last group may hold fewer rows): a bijection of the grid.
__device__ __forceinline__ void wt_tile_origin(int& bm, int& bn) {
#if WT_SWIZZLE > 1
    const int first = (int)(blockIdx.y / WT_SWIZZLE) * WT_SWIZZLE;  // the group's first tile-row
    const int rows = min(WT_SWIZZLE, (int)gridDim.y - first);
    const int local = ((int)blockIdx.y - first) * (int)gridDim.x + (int)blockIdx.x;  // < WT_SWIZZLE * gridDim.x
    bm = (first + local % rows) * WT_BM;
    bn = local / rows * WT_BN;
#else
    bm = blockIdx.y * WT_BM;
    bn = blockIdx.x * WT_BN;
#endif
}

#endif  // GPUPERF_WARP_SGEMM_CORE

#ifndef GPUPERF_WT_CORE_ONLY

// grid (ceil(N/WT_BN), ceil(M/WT_BM)), block WT_THREADS, dynamic shared memory WT_STAGES * (WT_A_STAGE + WT_B_STAGE)
// * 4 bytes. VEC: A, B, C 16-byte aligned and lda, ldb, ldc % 4 == 0.
extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
warp_sgemm_vec4(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    int bm, bn;
    wt_tile_origin(bm, bn);
    wt_sgemm_tile<true>(M, N, K, alpha, A, lda, B, ldb, beta, [=] { return C; }, ldc, bm, bn);
}

// The scalar fallback: any alignment, any leading dimension.
extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
warp_sgemm_scalar(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                  const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    int bm, bn;
    wt_tile_origin(bm, bn);
    wt_sgemm_tile<false>(M, N, K, alpha, A, lda, B, ldb, beta, [=] { return C; }, ldc, bm, bn);
}

#endif  // GPUPERF_WT_CORE_ONLY
