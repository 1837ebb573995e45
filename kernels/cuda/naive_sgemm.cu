// Naive SGEMM (seed 000 §2.1): one thread per element of C, every operand read straight from global
// memory. C = alpha * A * B + beta * C, row-major, any M, N, K, explicit leading dimensions.
// Launch: block (16, 16), grid (ceil(N/16), ceil(M/16)); threadIdx.x walks columns so that the reads
// of B and the writes of C are coalesced across a warp. beta == 0 never reads C (C may hold NaN).
//
// What limits it: each FMA needs two global loads (A[row][p] is re-read by every thread of a block row,
// B[p][col] by every thread of a block column); the L1 absorbs part of that, but the kernel stays bound
// by load instructions and L1/L2 traffic, far below the FP32 pipes.

extern "C" __global__ void naive_sgemm(int M, int N, int K, float alpha,
                                       const float* __restrict__ A, int lda,
                                       const float* __restrict__ B, int ldb,
                                       float beta, float* __restrict__ C, int ldc) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * lda;
    const float* b = B + col;
    float sum = 0.0f;
    for (int p = 0; p < K; ++p) {
        sum = fmaf(a[p], b[(size_t)p * ldb], sum);
    }
    float* c = C + (size_t)row * ldc + col;
    *c = (beta == 0.0f) ? alpha * sum : fmaf(beta, *c, alpha * sum);
}
