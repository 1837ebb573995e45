// Custom batched SGEMM (seed 002 §3.1-3.2): C_b = alpha * A_b * B_b + beta * C_b for b < batch,
// row-major, any M, N, K, explicit leading dimensions, in two forms:
//   * strided:       A_b = A + b * strideA (likewise B, C); strideA = 0 shares one A across the batch;
//   * pointer array: A_b = Aarray[b] (likewise B, C), the pointers in device memory.
// A kernel takes both; the pointer arrays are used when they are not null.
//
// Two kernels, chosen by the host from the matrix size:
//
// batched_sgemm_small_*  (tiny and small matrices, e.g. 8^3 .. 32^3): one block of 256 threads
//   multiplies `group` whole matrices (a block per matrix once a matrix has >= 256 output strips, so
//   grid x = ceil(batch / group)). The block stages A and B of all its matrices in shared memory in one
//   pass (loads of many matrices in flight at once, all coalesced: consecutive threads read consecutive
//   addresses of the packed operands), then each thread computes strips of 4 consecutive elements of a
//   row of C: per k one A value (a broadcast) and one float4 of B, 4 FMAs, and the strip is written as
//   one 16-byte store when aligned. A is staged with an odd row pitch (K | 1) so that the rows a warp
//   reads fall on distinct banks; B rows are padded to whole float4s. For such small products the
//   kernel is bound by memory traffic and launch-free parallelism, which is where cuBLAS's general
//   batched kernels lose: they tile each matrix on its own.
//
// batched_sgemm_tiled_*  (larger matrices): grid (ceil(N/128), ceil(M/128), batch) with the
//   optimised SGEMM's 128x128 tile core (register tiles, float4, double buffering), one product per
//   grid z. The host splits batches above 65535 (the grid z limit) into several launches through
//   `batch_offset`.
//
// *_vec4 variants may use 16-byte global accesses: the host has checked that every matrix start is
// 16-byte aligned and lda, ldb, ldc are multiples of 4. *_scalar variants accept any alignment.
// beta == 0 never reads C.

#define GPUPERF_SGEMM_CORE_ONLY
#include "optimized_sgemm.cu"

#define BS_THREADS 256

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

// grid (ceil(batch / group)), block 256, dynamic shared memory from the host.
extern "C" __global__ void __launch_bounds__(BS_THREADS)
batched_sgemm_small_vec4(GPUPERF_BATCHED_PARAMS, int batch, int group) {
    batched_small_impl<true>(GPUPERF_BATCHED_ARGS, batch, group);
}

extern "C" __global__ void __launch_bounds__(BS_THREADS)
batched_sgemm_small_scalar(GPUPERF_BATCHED_PARAMS, int batch, int group) {
    batched_small_impl<false>(GPUPERF_BATCHED_ARGS, batch, group);
}

// grid (ceil(N/128), ceil(M/128), min(batch - batch_offset, 65535)), block 256.
extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
batched_sgemm_tiled_vec4(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_tiled_impl<true>(GPUPERF_BATCHED_ARGS, batch_offset);
}

extern "C" __global__ void __launch_bounds__(OPT_THREADS, 2)
batched_sgemm_tiled_scalar(GPUPERF_BATCHED_PARAMS, int batch_offset) {
    batched_tiled_impl<false>(GPUPERF_BATCHED_ARGS, batch_offset);
}
