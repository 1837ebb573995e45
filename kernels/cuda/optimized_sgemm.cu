// Optimised SGEMM: C = alpha * A * B + beta * C, row-major, any M, N, K, explicit leading dimensions.
//
// Design (seed 000 §2.3: register tiles + float4 + a multi-stage pipeline + a bank-conflict-free layout):
//   * a 256-thread block computes a 128x128 tile of C; it walks K in steps of OPT_BK (16 by default);
//   * each thread owns an 8x8 register tile: rows {ty*4+i, 64+ty*4+i} x cols {tx*4+j, 64+tx*4+j}
//     (i, j < 4; tx, ty < 16), so every shared-memory read is one LDS.128; a warp covers 8 x 4 thread
//     tiles, so per k it reads 4 distinct float4s of A and 128 contiguous bytes of B (broadcasts, no
//     bank conflicts). The fragments of step k+1 are read while step k's 64 FFMAs run (two register
//     sets);
//   * shared memory is a ring of OPT_STAGES K-tiles in dynamic shared memory (the host sizes it:
//     OPT_STAGES * OPT_BK * (OPT_BM + OPT_APAD + OPT_BN) floats). B tiles are copied global -> shared
//     with cp.async (16 bytes, zero-filled past the matrix edges) OPT_STAGES - 1 tiles ahead;
//   * the A tile is stored transposed (As[k][m]) so that a thread's 8 A values for one k are two
//     float4s, which cp.async cannot do: A goes global -> registers one K-tile ahead (its latency
//     hidden behind a whole K-tile of FFMAs) and is stored with four scalar STS. A loader covers 16
//     rows x 2 quads of k per warp and rows are padded by 4 floats, so those stores hit 32 distinct
//     banks; rows stay 16-byte aligned. One __syncthreads per K-tile;
//   * global accesses are 16-byte (LDG.E.128, cp.async 16, STG.E.128) when the host has checked that
//     A, B, C are 16-byte aligned and lda, ldb, ldc are multiples of 4 (template VEC = true); any
//     access that would cross the matrix edge, and every access of the VEC = false instantiation,
//     falls back to guarded scalar ones (4-byte cp.async for B) that read zeros outside the matrix;
//   * epilogue: alpha (and beta x old C) in registers, one float4 store per 4 columns;
//     beta == 0 never reads C (C may hold NaN).
//
// The core is a __device__ template so that batched_sgemm.cu reuses it for large batched products
// (grid z = batch); define GPUPERF_SGEMM_CORE_ONLY before including this file to get the core alone.

#ifndef GPUPERF_OPTIMIZED_SGEMM_CORE
#define GPUPERF_OPTIMIZED_SGEMM_CORE

#include "cp_async.cu"

#define OPT_BM 128
#define OPT_BN 128
#ifndef OPT_BK
#define OPT_BK 16
#endif
#ifndef OPT_STAGES
#define OPT_STAGES 3
#endif
#define OPT_THREADS 256
#define OPT_APAD 4
#define OPT_A_PITCH (OPT_BM + OPT_APAD)

static_assert(OPT_BK == 8 || OPT_BK == 16, "the A loader covers 8 k per warp and load");
static_assert(OPT_STAGES >= 2, "A is stored one K-tile ahead into the stage after the current one");

template <bool VEC>
__device__ __forceinline__ float4 opt_load4(const float* __restrict__ p, int col, int limit, bool row_ok) {
    // Four consecutive elements p[0..3], which sit at columns col..col+3 of their row: zeros past
    // `limit` or outside the matrix (p is not dereferenced then).
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!row_ok) return v;
    if (VEC && col + 3 < limit) return *reinterpret_cast<const float4*>(p);
    if (col + 0 < limit) v.x = p[0];
    if (col + 1 < limit) v.y = p[1];
    if (col + 2 < limit) v.z = p[2];
    if (col + 3 < limit) v.w = p[3];
    return v;
}

// Four floats p[0..3] into the 16-byte shared slot dst with cp.async: the first `avail` (0..4) of them, the
// ones inside the matrix, are read; the rest of the slot is zero. `valid` is any address inside the
// matrix, given to the copies that read nothing.
template <bool VEC>
__device__ __forceinline__ void opt_copy4(float* dst, const float* p, int avail, const float* valid) {
    if (VEC) {
        cp_async16(dst, avail ? p : valid, 4 * avail);
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) cp_async4(dst + j, j < avail ? p + j : valid, j < avail ? 4 : 0);
}

template <bool VEC>
__device__ __forceinline__ void opt_store4(float* __restrict__ row, int col, int limit, float4 v, float beta) {
    // row[col..col+3] = v (+ beta * old), only inside the matrix; beta == 0 never reads.
    if (VEC && col + 3 < limit) {
        float4* p = reinterpret_cast<float4*>(row + col);
        if (beta != 0.f) {
            const float4 old = *p;
            v.x = fmaf(beta, old.x, v.x);
            v.y = fmaf(beta, old.y, v.y);
            v.z = fmaf(beta, old.z, v.z);
            v.w = fmaf(beta, old.w, v.w);
        }
        *p = v;
        return;
    }
    const float vals[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (col + j < limit) {
            float out = vals[j];
            if (beta != 0.f) out = fmaf(beta, row[col + j], out);
            row[col + j] = out;
        }
    }
}

// One 128x128 tile of C at (bm, bn). A and B point at this product's matrices; c_matrix() returns
// C's, and is called only in the epilogue so that the pointer holds no register during the main loop.
template <bool VEC, class CMatrix>
__device__ __forceinline__ void opt_sgemm_tile(int M, int N, int K, float alpha,
                                               const float* __restrict__ A, int lda,
                                               const float* __restrict__ B, int ldb,
                                               float beta, CMatrix c_matrix, int ldc,
                                               int bm, int bn) {
    extern __shared__ __align__(16) float opt_smem[];
    float* const As = opt_smem;                                      // [OPT_STAGES][OPT_BK][OPT_A_PITCH]
    float* const Bs = opt_smem + OPT_STAGES * OPT_BK * OPT_A_PITCH;  // [OPT_STAGES][OPT_BK][OPT_BN]
    constexpr int A_LOADS = OPT_BK / 8;  // float4s of A per thread and K-tile
    constexpr int B_LOADS = OPT_BK / 8;  // float4s of B per thread and K-tile

    const int tid = threadIdx.x;
    // Thread (tx, ty) of the 16x16 grid of register tiles; a warp holds an 8 (tx) x 4 (ty) block of them,
    // so per k it reads 4 distinct float4s of A and 8 consecutive float4s (128 bytes) of B.
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int tx = ((warp & 1) << 3) | (lane & 7);  // column group, 0..15
    const int ty = ((warp >> 1) << 2) | (lane >> 3);  // row group, 0..15

    // A loader: load i of a thread reads row warp*16 + lane%16, k quad 2i + lane/16 (k 8i + 4*(lane/16) ..).
    const int a_row = (warp << 4) | (lane & 15);
    const int a_k = (lane >> 4) << 2;
    const bool a_row_ok = bm + a_row < M;
    const float* a_src = A + (size_t)(a_row_ok ? bm + a_row : 0) * lda + a_k;  // walks K with the fetches
    // B loader: load i of a thread copies k row warp + 8i, columns lane*4 .. +3: a warp copies 512 bytes of a row.
    const int b_col = lane << 2;
    const int b_avail = max(0, min(4, N - (bn + b_col)));  // columns of the thread's float4 inside the matrix
    const float* b_src = B + (size_t)warp * ldb + bn + b_col;  // walks K with the copies
    const size_t b_row8 = (size_t)8 * ldb;
    const size_t b_step = (size_t)OPT_BK * ldb;

    auto load_b = [&](int stage, int k0) {  // K-tile at k0 into `stage`; b_src points at its row k0 + warp
        float* dst = Bs + (stage * OPT_BK + warp) * OPT_BN + b_col;
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const bool row_ok = k0 + warp + 8 * i < K;
            opt_copy4<VEC>(dst + 8 * i * OPT_BN, b_src + i * b_row8, row_ok ? b_avail : 0, B);
        }
        b_src += b_step;
    };
    float4 ra[A_LOADS];
    auto fetch_a = [&](int k0) {  // K-tile at k0 into registers; a_src points at its column k0 + a_k
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) ra[i] = opt_load4<VEC>(a_src + 8 * i, k0 + 8 * i + a_k, K, a_row_ok);
        a_src += OPT_BK;
    };
    auto stash_a = [&](int stage) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            float* dst = As + (stage * OPT_BK + 8 * i + a_k) * OPT_A_PITCH + a_row;
            dst[0] = ra[i].x;
            dst[OPT_A_PITCH] = ra[i].y;
            dst[2 * OPT_A_PITCH] = ra[i].z;
            dst[3 * OPT_A_PITCH] = ra[i].w;
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    const int ktiles = (K + OPT_BK - 1) / OPT_BK;
    // Prologue: B of K-tiles 0 .. OPT_STAGES-2 in flight, A of K-tile 0 in stage 0, A of K-tile 1 in registers.
#pragma unroll
    for (int s = 0; s < OPT_STAGES - 1; ++s) {
        if (s < ktiles) load_b(s, s * OPT_BK);
        cp_async_commit();
    }
    fetch_a(0);
    stash_a(0);
    if (ktiles > 1) fetch_a(OPT_BK);
    cp_async_wait<OPT_STAGES - 2>();
    __syncthreads();

    // Stages, advanced one per K-tile: `cur` is read now; `ahead` (= cur - 1) receives B of K-tile kt + STAGES - 1
    // (it was read in iteration kt - 1, and every thread is past that since the last barrier); `next` (= cur + 1)
    // receives A of K-tile kt + 1 (last read in iteration kt + 1 - STAGES, before the last barrier).
    int cur = 0;
    int ahead = OPT_STAGES - 1;
    int next = 1 % OPT_STAGES;
    for (int kt = 0; kt < ktiles; ++kt) {
        if (kt + OPT_STAGES - 1 < ktiles) load_b(ahead, (kt + OPT_STAGES - 1) * OPT_BK);
        cp_async_commit();
        const float* as = As + cur * OPT_BK * OPT_A_PITCH;
        const float* bs = Bs + cur * OPT_BK * OPT_BN;
        float4 fa[2][2], fb[2][2];  // the fragments of step k (set k & 1) and of step k + 1
        fa[0][0] = *reinterpret_cast<const float4*>(as + ty * 4);
        fa[0][1] = *reinterpret_cast<const float4*>(as + ty * 4 + 64);
        fb[0][0] = *reinterpret_cast<const float4*>(bs + tx * 4);
        fb[0][1] = *reinterpret_cast<const float4*>(bs + tx * 4 + 64);
#pragma unroll
        for (int k = 0; k < OPT_BK; ++k) {
            const int now = k & 1;
            if (k + 1 < OPT_BK) {
                const float* a_next = as + (k + 1) * OPT_A_PITCH;
                const float* b_next = bs + (k + 1) * OPT_BN;
                fa[now ^ 1][0] = *reinterpret_cast<const float4*>(a_next + ty * 4);
                fa[now ^ 1][1] = *reinterpret_cast<const float4*>(a_next + ty * 4 + 64);
                fb[now ^ 1][0] = *reinterpret_cast<const float4*>(b_next + tx * 4);
                fb[now ^ 1][1] = *reinterpret_cast<const float4*>(b_next + tx * 4 + 64);
            }
            const float a[8] = {fa[now][0].x, fa[now][0].y, fa[now][0].z, fa[now][0].w,
                                fa[now][1].x, fa[now][1].y, fa[now][1].z, fa[now][1].w};
            const float b[8] = {fb[now][0].x, fb[now][0].y, fb[now][0].z, fb[now][0].w,
                                fb[now][1].x, fb[now][1].y, fb[now][1].z, fb[now][1].w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < ktiles) {
            stash_a(next);
            if (kt + 2 < ktiles) fetch_a((kt + 2) * OPT_BK);
        }
        cp_async_wait<OPT_STAGES - 2>();  // B of K-tile kt + 1 has landed
        __syncthreads();
        cur = cur + 1 == OPT_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == OPT_STAGES ? 0 : ahead + 1;
        next = next + 1 == OPT_STAGES ? 0 : next + 1;
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row < M) {
            float* c_row = c_matrix() + (size_t)row * ldc;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float4 v = make_float4(alpha * acc[i][h * 4 + 0], alpha * acc[i][h * 4 + 1],
                                             alpha * acc[i][h * 4 + 2], alpha * acc[i][h * 4 + 3]);
                opt_store4<VEC>(c_row, bn + h * 64 + tx * 4, N, v, beta);
            }
        }
    }
}

#endif  // GPUPERF_OPTIMIZED_SGEMM_CORE

#ifndef GPUPERF_SGEMM_CORE_ONLY

// grid (ceil(N/128), ceil(M/128)), block 256, dynamic shared memory OPT_STAGES * OPT_BK * (OPT_A_PITCH +
// OPT_BN) * 4 bytes. VEC: A, B, C 16-byte aligned and lda, ldb, ldc % 4 == 0.
extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
optimized_sgemm_vec4(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                     const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    opt_sgemm_tile<true>(M, N, K, alpha, A, lda, B, ldb, beta, [=] { return C; }, ldc, blockIdx.y * OPT_BM,
                         blockIdx.x * OPT_BN);
}

// The scalar fallback: any alignment, any leading dimension.
extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
optimized_sgemm_scalar(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                       const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    opt_sgemm_tile<false>(M, N, K, alpha, A, lda, B, ldb, beta, [=] { return C; }, ldc, blockIdx.y * OPT_BM,
                          blockIdx.x * OPT_BN);
}

#endif  // GPUPERF_SGEMM_CORE_ONLY
