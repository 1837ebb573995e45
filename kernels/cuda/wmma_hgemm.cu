// WMMA tensor-core HGEMM (seed 002 §3.3): C = alpha * A * B + beta * C, row-major, any M, N, K.
//
// Types: A, B and C are FP16 (storage `half`), alpha and beta FP32; products are accumulated in FP32
// on the tensor cores and the epilogue (alpha, beta, the old C) runs in FP32 before one rounding to
// FP16. This is exactly what cuBLAS computes for gemmEx(CUDA_R_16F A/B/C, CUBLAS_COMPUTE_32F), the
// suite's "fp16" path, so the ratio to cuBLAS compares the same work (same bytes, same FLOPs), and the
// accuracy bound is the "fp16" one: FP32 accumulation plus one FP16 output rounding.
//
// Design:
//   * 256 threads = 8 warps compute a 128x128 tile of C; warps form a 2 (M) x 4 (N) grid, each owning
//     a 64x32 sub-tile = 4 x 2 WMMA 16x16x16 accumulator fragments (FP32);
//   * K advances 32 at a time through shared memory, double-buffered: the next A (128x32) and B
//     (32x128) tiles are fetched into registers while the tensor cores work on the current ones;
//   * shared tiles are padded by 8 halves per row (A pitch 40, B pitch 136 halves): row starts then
//     step 20 resp. 4 banks, so the 8 rows a fragment load touches fall on distinct banks, and every
//     fragment start stays 32-byte aligned as load_matrix_sync requires;
//   * edges: every global load is bounds-checked and zero-filled in shared memory, so M, N, K need not
//     be multiples of 16 (or of anything). 16-byte loads (8 halves) are used when the host has checked
//     A, B, C are 16-byte aligned and lda, ldb, ldc are multiples of 8 (template VEC); otherwise, and
//     for any chunk that crosses an edge, guarded scalar loads;
//   * epilogue: each warp stores an accumulator fragment into its own 16x16 FP32 scratch in shared
//     memory, then every lane finishes 8 consecutive elements of one row (alpha, beta, bounds,
//     rounding) and writes them as one 16-byte store when aligned and inside the matrix;
//     beta == 0 never reads C.
//
// Needs <mma.h> (and <cuda_fp16.h>) from a CUDA toolkit: kernels/cuda_headers.py finds them.

#include <mma.h>
#include <cuda_fp16.h>

using namespace nvcuda;

#define WM_BM 128
#define WM_BN 128
#define WM_BK 32
#define WM_THREADS 256
#define WM_APITCH (WM_BK + 8)  // halves per row of the A tile
#define WM_BPITCH (WM_BN + 8)  // halves per row of the B tile
#define WM_CPITCH 20           // floats per row of a warp's epilogue scratch

typedef unsigned short hbits;  // raw FP16 bits: copies never need half arithmetic

// Eight consecutive halves row[col..col+7] as a uint4, zeros outside the matrix.
template <bool VEC>
__device__ __forceinline__ uint4 wm_load8(const hbits* __restrict__ row, int col, int limit, bool row_ok) {
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (!row_ok) return v;
    if (VEC && col + 7 < limit) return *reinterpret_cast<const uint4*>(row + col);
    unsigned int w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        if (col + e < limit) w[e >> 1] |= (unsigned int)row[col + e] << ((e & 1) * 16);
    }
    v.x = w[0];
    v.y = w[1];
    v.z = w[2];
    v.w = w[3];
    return v;
}

template <bool VEC>
__device__ __forceinline__ void wmma_hgemm_impl(int M, int N, int K, float alpha,
                                                const hbits* __restrict__ A, int lda,
                                                const hbits* __restrict__ B, int ldb,
                                                float beta, hbits* __restrict__ C, int ldc) {
    __shared__ __align__(128) hbits As[2][WM_BM][WM_APITCH];
    __shared__ __align__(128) hbits Bs[2][WM_BK][WM_BPITCH];
    __shared__ __align__(128) float Cs[WM_THREADS / 32][16][WM_CPITCH];

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int warp_m = warp >> 2;  // 0..1: rows warp_m*64 .. +63
    const int warp_n = warp & 3;   // 0..3: cols warp_n*32 .. +31
    const int bm = blockIdx.y * WM_BM;
    const int bn = blockIdx.x * WM_BN;

    // Loader roles: each tile is 512 chunks of 8 halves, two per thread.
    // A: chunk c -> row c/4 (0..127), k offset (c%4)*8.  B: chunk c -> k row c/16 (0..31), col (c%16)*8.
    int a_row[2], a_k[2], b_k[2], b_col[2];
    bool a_ok[2];
    const hbits* a_src[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int c = tid + i * WM_THREADS;
        a_row[i] = c >> 2;
        a_k[i] = (c & 3) << 3;
        b_k[i] = c >> 4;
        b_col[i] = (c & 15) << 3;
        a_ok[i] = bm + a_row[i] < M;
        a_src[i] = A + (size_t)(a_ok[i] ? bm + a_row[i] : 0) * lda;
    }

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    uint4 ra[2], rb[2];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            ra[i] = wm_load8<VEC>(a_src[i], k0 + a_k[i], K, a_ok[i]);
            const int gk = k0 + b_k[i];
            rb[i] = wm_load8<VEC>(B + (size_t)(gk < K ? gk : 0) * ldb, bn + b_col[i], N, gk < K);
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            *reinterpret_cast<uint4*>(&As[buf][a_row[i]][a_k[i]]) = ra[i];
            *reinterpret_cast<uint4*>(&Bs[buf][b_k[i]][b_col[i]]) = rb[i];
        }
    };

    const int ktiles = (K + WM_BK - 1) / WM_BK;
    fetch(0);
    stash(0);
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) fetch((kt + 1) * WM_BK);
#pragma unroll
        for (int kk = 0; kk < WM_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> af[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> bf[2];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                wmma::load_matrix_sync(af[i], reinterpret_cast<const half*>(&As[cur][warp_m * 64 + i * 16][kk]),
                                       WM_APITCH);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(bf[j], reinterpret_cast<const half*>(&Bs[cur][kk][warp_n * 32 + j * 16]),
                                       WM_BPITCH);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
        if (has_next) stash(cur ^ 1);  // the other buffer was last read before the previous barrier
        __syncthreads();
    }

    // Epilogue through the warp's scratch: lane -> row lane/2, columns (lane%2)*8 .. +7.
    float* scratch = &Cs[warp][0][0];
    const int er = lane >> 1;
    const int ec = (lane & 1) << 3;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(scratch, acc[i][j], WM_CPITCH, wmma::mem_row_major);
            __syncwarp();
            const int row = bm + warp_m * 64 + i * 16 + er;
            const int col = bn + warp_n * 32 + j * 16 + ec;
            if (row < M) {
                hbits* c_row = C + (size_t)row * ldc;
                float v[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] = alpha * scratch[er * WM_CPITCH + ec + e];
                if (VEC && col + 7 < N) {
                    uint4* p = reinterpret_cast<uint4*>(c_row + col);
                    unsigned int w[4];
                    if (beta != 0.0f) {
                        const uint4 old = *p;
                        const unsigned int o[4] = {old.x, old.y, old.z, old.w};
#pragma unroll
                        for (int e = 0; e < 8; ++e) {
                            const hbits h = (hbits)(o[e >> 1] >> ((e & 1) * 16));
                            v[e] = fmaf(beta, __half2float(__ushort_as_half(h)), v[e]);
                        }
                    }
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        w[q] = (unsigned int)__half_as_ushort(__float2half_rn(v[2 * q])) |
                               ((unsigned int)__half_as_ushort(__float2half_rn(v[2 * q + 1])) << 16);
                    }
                    *p = make_uint4(w[0], w[1], w[2], w[3]);
                } else {
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        if (col + e < N) {
                            float out = v[e];
                            if (beta != 0.0f) out = fmaf(beta, __half2float(__ushort_as_half(c_row[col + e])), out);
                            c_row[col + e] = __half_as_ushort(__float2half_rn(out));
                        }
                    }
                }
            }
            __syncwarp();  // the scratch is rewritten by the next fragment
        }
    }
}

// grid (ceil(N/128), ceil(M/128)), block 256. VEC: A, B, C 16-byte aligned and lda, ldb, ldc % 8 == 0.
extern "C" __global__ void __launch_bounds__(WM_THREADS, 2)
wmma_hgemm_vec8(int M, int N, int K, float alpha, const hbits* __restrict__ A, int lda,
                const hbits* __restrict__ B, int ldb, float beta, hbits* __restrict__ C, int ldc) {
    wmma_hgemm_impl<true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The scalar fallback: any alignment, any leading dimension.
extern "C" __global__ void __launch_bounds__(WM_THREADS, 2)
wmma_hgemm_scalar(int M, int N, int K, float alpha, const hbits* __restrict__ A, int lda,
                  const hbits* __restrict__ B, int ldb, float beta, hbits* __restrict__ C, int ldc) {
    wmma_hgemm_impl<false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
