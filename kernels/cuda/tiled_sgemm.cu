// Shared-memory tiled SGEMM (seed 000 §2.2): a TILE x TILE block of threads computes a TILE x TILE
// tile of C, staging one TILE x TILE tile of A and of B in shared memory per step along K, so each
// global element is read once per block instead of once per thread (global traffic / TILE).
// C = alpha * A * B + beta * C, row-major, any M, N, K (the tiles are zero-padded at the edges),
// explicit leading dimensions. beta == 0 never reads C.
//
// TILE is a compile-time macro, 16 by default (the seed's kernel). Building it with -DTILE=8 gives a
// genuinely slower variant (half the reuse per global load, a quarter of the threads per block) that
// the suite uses to show that its gate notices a slower kernel.
// Launch: block (TILE, TILE), grid (ceil(N/TILE), ceil(M/TILE)).
//
// What limits it: every FMA still needs two shared-memory loads (As[ty][p] is a broadcast, Bs[p][tx] a
// conflict-free row), so the kernel is bound by LDS throughput, not by the FP32 pipes; there is no
// register reuse, no vector load, and the loads of the next tile are not overlapped with the math.

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
tiled_sgemm(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
            const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float sum = 0.0f;
    const int tiles = (K + TILE - 1) / TILE;
    for (int t = 0; t < tiles; ++t) {
        const int a_col = t * TILE + tx;
        As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * lda + a_col] : 0.0f;
        const int b_row = t * TILE + ty;
        Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * ldb + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TILE; ++p) {
            sum = fmaf(As[ty][p], Bs[p][tx], sum);
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        float* c = C + (size_t)row * ldc + col;
        *c = (beta == 0.0f) ? alpha * sum : fmaf(beta, *c, alpha * sum);
    }
}
