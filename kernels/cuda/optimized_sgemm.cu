// Optimised SGEMM: C = alpha * A * B + beta * C, row-major, any M, N, K, explicit leading dimensions.
//
// Design (seed 000 §2.3: register tiles + float4 + double buffering + a bank-conflict-free layout):
//   * a 256-thread block computes a 128x128 tile of C; it walks K in steps of 8;
//   * each thread owns an 8x8 register tile: rows {ty*4+i, 64+ty*4+i} x cols {tx*4+j, 64+tx*4+j}
//     (i, j < 4; tx, ty < 16), so every shared-memory read is one LDS.128; a warp covers 8 x 4 thread
//     tiles, so per k it reads 4 distinct float4s of A and 128 contiguous bytes of B (broadcasts, no
//     bank conflicts);
//   * the A tile is stored transposed (As[k][m]) so that a thread's 8 A values for one k are two
//     float4s; its rows are padded by 4 floats, which makes the transposing scalar stores
//     conflict-free (the two k-halves of a warp land 16 banks apart) and keeps 16-byte alignment;
//   * shared memory is double-buffered: the next K-tile is fetched from global memory into registers
//     while the current one is multiplied, then stored into the other buffer; one __syncthreads per
//     K-tile;
//   * global loads are 16-byte (LDG.E.128) when the host has checked that A, B, C are 16-byte aligned
//     and lda, ldb, ldc are multiples of 4 (template VEC = true); any load that would cross the
//     matrix edge, and every load of the VEC = false instantiation, falls back to guarded scalar
//     loads that read zeros outside the matrix. Stores follow the same rule.
//   * beta == 0 never reads C (C may hold NaN).
//
// The core is a __device__ template so that batched_sgemm.cu reuses it for large batched products
// (grid z = batch); define GPUPERF_SGEMM_CORE_ONLY before including this file to get the core alone.

#ifndef GPUPERF_OPTIMIZED_SGEMM_CORE
#define GPUPERF_OPTIMIZED_SGEMM_CORE

#define OPT_BM 128
#define OPT_BN 128
#define OPT_BK 8
#define OPT_THREADS 256
#define OPT_APAD 4

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
    __shared__ __align__(16) float As[2][OPT_BK][OPT_BM + OPT_APAD];
    __shared__ __align__(16) float Bs[2][OPT_BK][OPT_BN];

    const int tid = threadIdx.x;
    // Thread (tx, ty) of the 16x16 grid of register tiles; a warp holds an 8 (tx) x 4 (ty) block of them,
    // so per k it reads 4 distinct float4s of A and 8 consecutive float4s (128 bytes) of B.
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int tx = ((warp & 1) << 3) | (lane & 7);  // column group, 0..15
    const int ty = ((warp >> 1) << 2) | (lane >> 3);  // row group, 0..15

    // Loader roles: A tile is 128 rows x 8 k = 256 float4 (one per thread); B tile 8 k x 128 cols.
    const int a_row = tid >> 1;         // 0..127
    const int a_k = (tid & 1) << 2;     // 0 or 4
    const int b_k = tid >> 5;           // 0..7
    const int b_col = (tid & 31) << 2;  // 0..124

    const bool a_row_ok = bm + a_row < M;
    const int b_gcol = bn + b_col;
    // Each loader walks one pointer along K: A by OPT_BK columns, B by OPT_BK rows per K-tile.
    const float* a_src = A + (size_t)(a_row_ok ? bm + a_row : 0) * lda + a_k;
    const float* b_src = B + (size_t)b_k * ldb + b_gcol;
    const size_t b_step = (size_t)OPT_BK * ldb;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    const int ktiles = (K + OPT_BK - 1) / OPT_BK;

    float4 ra = opt_load4<VEC>(a_src, a_k, K, a_row_ok);
    float4 rb = opt_load4<VEC>(b_src, b_gcol, N, b_k < K);
    As[0][a_k + 0][a_row] = ra.x;
    As[0][a_k + 1][a_row] = ra.y;
    As[0][a_k + 2][a_row] = ra.z;
    As[0][a_k + 3][a_row] = ra.w;
    *reinterpret_cast<float4*>(&Bs[0][b_k][b_col]) = rb;
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) {  // fetch the next K-tile into registers; it lands while this one is multiplied
            const int k0 = (kt + 1) * OPT_BK;
            a_src += OPT_BK;
            b_src += b_step;
            ra = opt_load4<VEC>(a_src, k0 + a_k, K, a_row_ok);
            rb = opt_load4<VEC>(b_src, b_gcol, N, k0 + b_k < K);
        }
#pragma unroll
        for (int k = 0; k < OPT_BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4 + 64]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4 + 64]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (has_next) {  // the other buffer was last read before the previous barrier
            const int nxt = cur ^ 1;
            As[nxt][a_k + 0][a_row] = ra.x;
            As[nxt][a_k + 1][a_row] = ra.y;
            As[nxt][a_k + 2][a_row] = ra.z;
            As[nxt][a_k + 3][a_row] = ra.w;
            *reinterpret_cast<float4*>(&Bs[nxt][b_k][b_col]) = rb;
        }
        __syncthreads();
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

// grid (ceil(N/128), ceil(M/128)), block 256. VEC: A, B, C 16-byte aligned and lda, ldb, ldc % 4 == 0.
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
