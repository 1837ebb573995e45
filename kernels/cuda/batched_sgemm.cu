// Custom batched SGEMM (seed 002 §3.1-3.2): C_b = alpha * A_b * B_b + beta * C_b for b < batch,
// row-major, any M, N, K, explicit leading dimensions, in two forms:
//   * strided:       A_b = A + b * strideA (likewise B, C); strideA = 0 shares one A across the batch;
//   * pointer array: A_b = Aarray[b] (likewise B, C), the pointers in device memory.
// A kernel takes both; the pointer arrays are used when they are not null.
//
// Three kernels, chosen by the host from the matrix size (kernels/custom_plan.py):
//
// batched_sgemm_reg32_* / batched_sgemm_reg64_*  (M, N up to 32 resp. 64 filling at least a quarter of
//   that tile, K <= 64): register tiles. Each thread computes an 8 x 4 block of one matrix's C (rows
//   tr*8 .. +7, columns tc*4 .. +3), so a 32 x 32 matrix takes one warp and a 64 x 64 one four warps;
//   a block holds BR32_MATS resp. BR64_MATS matrices. The block copies A and B of its matrices into
//   shared memory with 16-byte cp.async (zero-filled past K and N; no register staging, all copies in
//   flight at once), waits once, then per 4 k reads 8 float4s of A (rows of A, a broadcast within each
//   quarter-warp) and 4 float4s of B (128 contiguous bytes per quarter-warp): 128 FFMAs per 12 LDS.128
//   and no bank conflicts. Results leave as one 16-byte store per row and thread. The SMs overlap one
//   block's copies with another's math (several blocks per SM): at 32^3 and 64^3 the batch is bound by
//   DRAM traffic plus the FFMAs, which is where cuBLAS's batched kernels (one tile walk per matrix) lose.
//
// batched_sgemm_small_*  (tiny matrices, e.g. 8^3): one block of 256 threads multiplies `group` whole
//   matrices (a block per matrix once a matrix has >= 256 output strips, so grid x = ceil(batch /
//   group)). The block stages A and B of all its matrices in shared memory in one pass (loads of many
//   matrices in flight at once, all coalesced: consecutive threads read consecutive addresses of the
//   packed operands), then each thread computes strips of 4 consecutive elements of a row of C: per k
//   one A value (a broadcast) and one float4 of B, 4 FMAs, and the strip is written as one 16-byte
//   store when aligned. A is staged with an odd row pitch (K | 1) so that the rows a warp reads fall on
//   distinct banks; B rows are padded to whole float4s. For such small products the kernel is bound by
//   memory traffic and launch-free parallelism.
//
// batched_sgemm_tiled_*  (larger matrices): grid (ceil(N/128), ceil(M/128), batch) with the
//   optimised SGEMM's 128x128 tile core (register tiles, float4, cp.async pipeline; its dynamic shared
//   memory sized by the host), one product per grid z. The host splits batches above 65535 (the grid z
//   limit) into several launches through `batch_offset`.
//
// *_vec4 variants may use 16-byte global accesses: the host has checked that every matrix start is
// 16-byte aligned and lda, ldb, ldc are multiples of 4. *_scalar variants accept any alignment.
// beta == 0 never reads C.

#define GPUPERF_SGEMM_CORE_ONLY
#include "optimized_sgemm.cu"

#define BS_THREADS 256

#define BR_THREAD_ROWS 8  // rows of C per thread in the register-tiled kernels
#define BR_THREAD_COLS 4  // columns of C per thread (one float4)
#define BR_MAX_K 64       // K they take: A and B of a matrix are staged whole
#define BR_SM_THREADS 768  // threads per SM the registers must allow: <= 80 registers per thread
#define BR32_TILE 32
#ifndef BR32_MATS
#define BR32_MATS 4  // matrices per block of the 32 x 32 kernel: one warp each
#endif
#define BR32_THREADS (BR32_MATS * (BR32_TILE / BR_THREAD_ROWS) * (BR32_TILE / BR_THREAD_COLS))
#define BR64_TILE 64
#ifndef BR64_MATS
#define BR64_MATS 1  // matrices per block of the 64 x 64 kernel: four warps each
#endif
#define BR64_THREADS (BR64_MATS * (BR64_TILE / BR_THREAD_ROWS) * (BR64_TILE / BR_THREAD_COLS))

__device__ __forceinline__ const float* bs_matrix(const float* base, const float* const* array, long long stride,
                                                  int b) {
    return array != nullptr ? array[b] : base + (long long)b * stride;
}

__device__ __forceinline__ float* bs_matrix_out(float* base, float* const* array, long long stride, int b) {
    return array != nullptr ? array[b] : base + (long long)b * stride;
}

// Shared memory of the small kernel, in floats, for `group` matrices (the host computes the same).
//   As: group * M * (K | 1), rounded up to a multiple of 4; then Bs: group * K * round_up(N, 4).
template <bool VEC>
__device__ __forceinline__ void batched_small_impl(int M, int N, int K, float alpha,
                                                   const float* __restrict__ A, const float* const* Aarray,
                                                   int lda, long long strideA,
                                                   const float* __restrict__ B, const float* const* Barray,
                                                   int ldb, long long strideB, float beta,
                                                   float* __restrict__ C, float* const* Carray,
                                                   int ldc, long long strideC, int batch, int group) {
    extern __shared__ __align__(16) float bs_smem[];
    const int KA = K | 1;             // odd pitch: consecutive rows of A on distinct banks
    const int NP = (N + 3) & ~3;      // B rows padded to whole float4s
    const int NQ = NP >> 2;           // float4s (strips) per row
    const int KQ = (K + 3) >> 2;      // float4s per row of A
    const int first = blockIdx.x * group;
    const int count = min(group, batch - first);
    float* As = bs_smem;
    float* Bs = bs_smem + ((group * M * KA + 3) & ~3);

    // Stage A: quad q -> (matrix b, row r, columns 4*cq .. 4*cq+3).
    const int a_quads = count * M * KQ;
    for (int q = threadIdx.x; q < a_quads; q += BS_THREADS) {
        const int rowid = q / KQ;  // = b * M + r
        const int cq = q - rowid * KQ;
        const int b = rowid / M;
        const int r = rowid - b * M;
        const float* src = bs_matrix(A, Aarray, strideA, first + b) + (size_t)r * lda + cq * 4;
        const int c0 = cq * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (VEC && c0 + 3 < K) {
            v = *reinterpret_cast<const float4*>(src);
        } else {
            if (c0 + 0 < K) v.x = src[0];
            if (c0 + 1 < K) v.y = src[1];
            if (c0 + 2 < K) v.z = src[2];
            if (c0 + 3 < K) v.w = src[3];
        }
        float* dst = As + rowid * KA + c0;
        dst[0] = v.x;
        if (c0 + 1 < K) dst[1] = v.y;
        if (c0 + 2 < K) dst[2] = v.z;
        if (c0 + 3 < K) dst[3] = v.w;
    }
    // Stage B: quad q -> (matrix b, k row r, columns 4*cq .. 4*cq+3), zero-padded to NP.
    const int b_quads = count * K * NQ;
    for (int q = threadIdx.x; q < b_quads; q += BS_THREADS) {
        const int rowid = q / NQ;  // = b * K + r
        const int cq = q - rowid * NQ;
        const int b = rowid / K;
        const int r = rowid - b * K;
        const float* src = bs_matrix(B, Barray, strideB, first + b) + (size_t)r * ldb + cq * 4;
        const int c0 = cq * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (VEC && c0 + 3 < N) {
            v = *reinterpret_cast<const float4*>(src);
        } else {
            if (c0 + 0 < N) v.x = src[0];
            if (c0 + 1 < N) v.y = src[1];
            if (c0 + 2 < N) v.z = src[2];
            if (c0 + 3 < N) v.w = src[3];
        }
        *reinterpret_cast<float4*>(Bs + rowid * NP + c0) = v;
    }
    __syncthreads();

    // Strip s -> (matrix b, row r, columns 4*cq .. 4*cq+3) of C.
    const int strips = count * M * NQ;
    for (int s = threadIdx.x; s < strips; s += BS_THREADS) {
        const int rowid = s / NQ;  // = b * M + r
        const int cq = s - rowid * NQ;
        const int b = rowid / M;
        const int r = rowid - b * M;
        const float* a = As + rowid * KA;
        const float* bp = Bs + b * K * NP + cq * 4;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
        for (int k = 0; k < K; ++k) {
            const float av = a[k];
            const float4 bv = *reinterpret_cast<const float4*>(bp + k * NP);
            acc.x = fmaf(av, bv.x, acc.x);
            acc.y = fmaf(av, bv.y, acc.y);
            acc.z = fmaf(av, bv.z, acc.z);
            acc.w = fmaf(av, bv.w, acc.w);
        }
        acc.x *= alpha;
        acc.y *= alpha;
        acc.z *= alpha;
        acc.w *= alpha;
        float* c_row = bs_matrix_out(C, Carray, strideC, first + b) + (size_t)r * ldc;
        opt_store4<VEC>(c_row, cq * 4, N, acc, beta);
    }
}

// The register-tiled form: matrix blockIdx.x * MATS + slot of TILE x TILE (M, N <= TILE, K <= BR_MAX_K).
// Shared memory per matrix: A as TILE x KP floats, then B as KP x TILE (KP = K rounded up to 4), row-major;
// the host sizes the block's MATS regions. A rows >= M and B columns >= N are never written: they only
// feed outputs outside C, which are not stored. The k padding (K .. KP) is zero in both.
template <int TILE, int MATS, bool VEC>
__device__ __forceinline__ void batched_reg_impl(int M, int N, int K, float alpha,
                                                 const float* __restrict__ A, const float* const* Aarray,
                                                 int lda, long long strideA,
                                                 const float* __restrict__ B, const float* const* Barray,
                                                 int ldb, long long strideB, float beta,
                                                 float* __restrict__ C, float* const* Carray,
                                                 int ldc, long long strideC, int batch) {
    constexpr int THREAD_COLS = TILE / BR_THREAD_COLS;  // threads along a row of C
    constexpr int PER_MATRIX = (TILE / BR_THREAD_ROWS) * THREAD_COLS;
    extern __shared__ __align__(16) float br_smem[];
    const int KP = (K + 3) & ~3;
    const int slot = threadIdx.x / PER_MATRIX;
    const int t = threadIdx.x - slot * PER_MATRIX;
    const int item = blockIdx.x * MATS + slot;
    float* const As = br_smem + slot * 2 * TILE * KP;
    float* const Bs = As + TILE * KP;

    const bool active = item < batch;  // uniform over a matrix's threads (whole warps)
    if (active) {
        const float* a = bs_matrix(A, Aarray, strideA, item);
        const float* b = bs_matrix(B, Barray, strideB, item);
        const int kq = KP >> 2;
        for (int q = t; q < M * kq; q += PER_MATRIX) {  // consecutive threads: consecutive float4s of a row
            const int r = q / kq;
            const int c = (q - r * kq) << 2;
            opt_copy4<VEC>(As + r * KP + c, a + (size_t)r * lda + c, min(4, K - c), a);
        }
        const int nq = (N + 3) >> 2;
        for (int q = t; q < KP * nq; q += PER_MATRIX) {  // rows K .. KP-1: zeros
            const int r = q / nq;
            const int c = (q - r * nq) << 2;
            opt_copy4<VEC>(Bs + r * TILE + c, b + (size_t)(r < K ? r : 0) * ldb + c, r < K ? min(4, N - c) : 0, b);
        }
    }
    cp_async_commit();
    cp_async_wait<0>();
    if (PER_MATRIX == 32) {
        __syncwarp();
    } else {
        __syncthreads();
    }
    if (!active) return;

    const int tr = t / THREAD_COLS;
    const int tc = t - tr * THREAD_COLS;
    const float* a_rows = As + tr * BR_THREAD_ROWS * KP;
    const float* b_cols = Bs + tc * BR_THREAD_COLS;
    float acc[BR_THREAD_ROWS][4];
#pragma unroll
    for (int i = 0; i < BR_THREAD_ROWS; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll 2
    for (int k = 0; k < KP; k += 4) {
        float4 bq[4];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) bq[kk] = *reinterpret_cast<const float4*>(b_cols + (k + kk) * TILE);
#pragma unroll
        for (int i = 0; i < BR_THREAD_ROWS; ++i) {
            const float4 aq = *reinterpret_cast<const float4*>(a_rows + i * KP + k);
            const float av[4] = {aq.x, aq.y, aq.z, aq.w};
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                acc[i][0] = fmaf(av[kk], bq[kk].x, acc[i][0]);
                acc[i][1] = fmaf(av[kk], bq[kk].y, acc[i][1]);
                acc[i][2] = fmaf(av[kk], bq[kk].z, acc[i][2]);
                acc[i][3] = fmaf(av[kk], bq[kk].w, acc[i][3]);
            }
        }
    }

    const int col = tc * BR_THREAD_COLS;
    if (col >= N) return;
    float* const c = bs_matrix_out(C, Carray, strideC, item);
#pragma unroll
    for (int i = 0; i < BR_THREAD_ROWS; ++i) {
        const int row = tr * BR_THREAD_ROWS + i;
        if (row < M) {
            const float4 v = make_float4(alpha * acc[i][0], alpha * acc[i][1], alpha * acc[i][2], alpha * acc[i][3]);
            opt_store4<VEC>(c + (size_t)row * ldc, col, N, v, beta);
        }
    }
}

// The large-matrix form: one 128x128 tile of product (batch_offset + blockIdx.z).
template <bool VEC>
__device__ __forceinline__ void batched_tiled_impl(int M, int N, int K, float alpha,
                                                   const float* __restrict__ A, const float* const* Aarray,
                                                   int lda, long long strideA,
                                                   const float* __restrict__ B, const float* const* Barray,
                                                   int ldb, long long strideB, float beta,
                                                   float* __restrict__ C, float* const* Carray,
                                                   int ldc, long long strideC, int batch_offset) {
    const int b = batch_offset + blockIdx.z;
    opt_sgemm_tile<VEC>(M, N, K, alpha, bs_matrix(A, Aarray, strideA, b), lda, bs_matrix(B, Barray, strideB, b), ldb,
                        beta, [=] { return bs_matrix_out(C, Carray, strideC, b); }, ldc, blockIdx.y * OPT_BM,
                        blockIdx.x * OPT_BN);
}

#define GPUPERF_BATCHED_PARAMS                                                                            \
    int M, int N, int K, float alpha, const float* __restrict__ A, const float* const* Aarray, int lda,   \
        long long strideA, const float* __restrict__ B, const float* const* Barray, int ldb,             \
        long long strideB, float beta, float* __restrict__ C, float* const* Carray, int ldc,             \
        long long strideC
#define GPUPERF_BATCHED_ARGS \
    M, N, K, alpha, A, Aarray, lda, strideA, B, Barray, ldb, strideB, beta, C, Carray, ldc, strideC

// grid (ceil(batch / BR32_MATS)), block BR32_THREADS, dynamic shared memory BR32_MATS * 2 * 32 * KP * 4 bytes.
extern "C" __global__ void __launch_bounds__(BR32_THREADS, BR_SM_THREADS / BR32_THREADS)
batched_sgemm_reg32_vec4(GPUPERF_BATCHED_PARAMS, int batch) {
    batched_reg_impl<BR32_TILE, BR32_MATS, true>(GPUPERF_BATCHED_ARGS, batch);
}

extern "C" __global__ void __launch_bounds__(BR32_THREADS, BR_SM_THREADS / BR32_THREADS)
batched_sgemm_reg32_scalar(GPUPERF_BATCHED_PARAMS, int batch) {
    batched_reg_impl<BR32_TILE, BR32_MATS, false>(GPUPERF_BATCHED_ARGS, batch);
}

// grid (ceil(batch / BR64_MATS)), block BR64_THREADS, dynamic shared memory BR64_MATS * 2 * 64 * KP * 4 bytes.
extern "C" __global__ void __launch_bounds__(BR64_THREADS, BR_SM_THREADS / BR64_THREADS)
batched_sgemm_reg64_vec4(GPUPERF_BATCHED_PARAMS, int batch) {
    batched_reg_impl<BR64_TILE, BR64_MATS, true>(GPUPERF_BATCHED_ARGS, batch);
}

extern "C" __global__ void __launch_bounds__(BR64_THREADS, BR_SM_THREADS / BR64_THREADS)
batched_sgemm_reg64_scalar(GPUPERF_BATCHED_PARAMS, int batch) {
    batched_reg_impl<BR64_TILE, BR64_MATS, false>(GPUPERF_BATCHED_ARGS, batch);
}

// grid (ceil(batch / group)), block 256, dynamic shared memory from the host.
extern "C" __global__ void __launch_bounds__(BS_THREADS)
batched_sgemm_small_vec4(GPUPERF_BATCHED_PARAMS, int batch, int group) {
    batched_small_impl<true>(GPUPERF_BATCHED_ARGS, batch, group);
}

extern "C" __global__ void __launch_bounds__(BS_THREADS)
batched_sgemm_small_scalar(GPUPERF_BATCHED_PARAMS, int batch, int group) {
    batched_small_impl<false>(GPUPERF_BATCHED_ARGS, batch, group);
}

// grid (ceil(N/128), ceil(M/128), min(batch - batch_offset, 65535)), block 256, dynamic shared memory as
// optimized_sgemm.cu's.
extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
batched_sgemm_tiled_vec4(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_tiled_impl<true>(GPUPERF_BATCHED_ARGS, batch_offset);
}

extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
batched_sgemm_tiled_scalar(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_tiled_impl<false>(GPUPERF_BATCHED_ARGS, batch_offset);
}

#ifdef WT_BM
// The tiled form on warp_sgemm.cu's core (a plan of an SGEMM_CONFIGS "wt..." build passes the WT_* defines; without
// them none of this is compiled): grid (ceil(N/WT_BN), ceil(M/WT_BM), min(batch - batch_offset, 65535)), block
// WT_THREADS, dynamic shared memory as warp_sgemm.cu's.
#define GPUPERF_WT_CORE_ONLY
#include "warp_sgemm.cu"

template <bool VEC>
__device__ __forceinline__ void batched_wtiled_impl(int M, int N, int K, float alpha,
                                                    const float* __restrict__ A, const float* const* Aarray,
                                                    int lda, long long strideA,
                                                    const float* __restrict__ B, const float* const* Barray,
                                                    int ldb, long long strideB, float beta,
                                                    float* __restrict__ C, float* const* Carray,
                                                    int ldc, long long strideC, int batch_offset) {
    const int b = batch_offset + blockIdx.z;
    wt_sgemm_tile<VEC>(M, N, K, alpha, bs_matrix(A, Aarray, strideA, b), lda, bs_matrix(B, Barray, strideB, b), ldb,
                       beta, [=] { return bs_matrix_out(C, Carray, strideC, b); }, ldc, blockIdx.y * WT_BM,
                       blockIdx.x * WT_BN);
}

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
batched_sgemm_wtiled_vec4(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_wtiled_impl<true>(GPUPERF_BATCHED_ARGS, batch_offset);
}

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
batched_sgemm_wtiled_scalar(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_wtiled_impl<false>(GPUPERF_BATCHED_ARGS, batch_offset);
}
#endif  // WT_BM
