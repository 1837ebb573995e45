// Tensor-core HGEMM with mma.sync (issue 15): C = alpha * A * B + beta * C, row-major, any M, N, K.
//
// Types as in wmma_hgemm.cu: A, B and C FP16, alpha and beta FP32, FP32 accumulation on the tensor
// cores, the epilogue (alpha, beta, the old C) in FP32 and one rounding to FP16: cuBLAS's gemmEx
// FP16 path with CUBLAS_COMPUTE_32F, the same work and the same accuracy bound.
//
// Design (what WMMA cannot express; geometry from the -D defines below, the host passes them):
//   * a block of MMA_WARPS_M x MMA_WARPS_N warps computes an MMA_BM x MMA_BN tile of C (default
//     128 x 128, 4 warps as 2 x 2, 4 stages, 2 blocks per SM: 0.51x cuBLAS against 0.42x for 128 x 256 with 8 warps on the H200); each warp a 64 x 64 sub-tile = 4 (m16) x 8 (n8) accumulators of
//     `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (inline PTX), 128 FP32 registers per lane;
//   * K advances 32 per K-tile through a ring of MMA_STAGES shared-memory stages filled by 16-byte
//     cp.async MMA_STAGES - 1 K-tiles ahead (no register staging); one cp.async.wait_group and one
//     __syncthreads per K-tile;
//   * fragments come from `ldmatrix.x4` (A, row-major) and `ldmatrix.x4.trans` (B, stored [k][n]),
//     each lane addressing one 16-byte row of an 8x8 matrix: per k16 step a warp issues 4 + 4 of them
//     for 32 mma (4 mma per ldmatrix);
//   * shared memory is XOR-swizzled at 16-byte granularity, no padding: the A tile's rows are 64 bytes
//     (4 chunks), chunk c of row r is stored at chunk c ^ ((r >> 1) & 3); the B tile's rows are
//     MMA_BN * 2 bytes, chunk c of row r at c ^ (r & 7). Every 8-lane phase of an ldmatrix (8 rows, one
//     logical chunk) and of the cp.async stores (one or two rows) then touches 8 distinct 16-byte bank
//     groups: conflict-free both ways;
//   * edges: a copy that crosses M, N or K reads only the elements inside the matrix and zero-fills the
//     rest of its 16 bytes (cp.async src-size), so any M, N, K work; the epilogue bounds-checks rows
//     and columns. 16-byte copies need the host's check that A, B are 16-byte aligned with lda, ldb
//     multiples of 8 (template VEC); otherwise (mma_hgemm_scalar) every chunk is gathered with guarded
//     2-byte loads and stored to shared memory synchronously, same pipeline;
//   * epilogue straight from the accumulators: each lane owns pairs of adjacent columns, stored as one
//     32-bit half2 (VEC) or as guarded halves; beta == 0 never reads C.
// Needs sm_80 (mma.m16n8k16, cp.async); no toolkit headers (conversions are PTX cvt).
//
// Options for probing (the defaults above are unchanged): MMA_BK = 64 (128-byte A rows, chunk c of row r at
// c ^ (r & 7)); MMA_PIPE = 1, a multistage loop in which every stage holds a K-tile and the fragments of the
// next k16 step (and, after the one barrier per K-tile, of the next K-tile) are loaded before this step's mma.
// MMA_FAST = 1 (not with MMA_PIPE; vec8 kernel only): in a block wholly inside M x N, the iterations whose copies
// (K-tile kt + MMA_STAGES - 1) lie wholly inside K run a copy of the loop without edge guards, in whole turns of the
// ring (the loop unrolled MMA_STAGES times): plain 16-byte cp.async (no src-size, no row or column predicates, no
// fallback address), global pointers advanced by constant strides, every shared-memory offset (copy destinations,
// ldmatrix stage bases) an immediate. The prologue's copies, the last MMA_STAGES - 1 to 2 MMA_STAGES - 1 iterations
// (those copying the K tail, and what is left of a turn), blocks on the M or N edge and the scalar kernel keep the
// guarded loop. In SASS (NVRTC 13, sm_90) the 128x128-s4 loop goes from 237 instructions per K-tile (64 HMMA) to 106.

#include "cp_async.cu"

#ifndef MMA_BM
#define MMA_BM 128
#endif
#ifndef MMA_BN
#define MMA_BN 128
#endif
#ifndef MMA_WARPS_M
#define MMA_WARPS_M 2
#endif
#ifndef MMA_WARPS_N
#define MMA_WARPS_N 2
#endif
#ifndef MMA_STAGES
#define MMA_STAGES 4
#endif
#ifndef MMA_MIN_BLOCKS
#define MMA_MIN_BLOCKS 2
#endif
#ifndef MMA_BK
#define MMA_BK 32  // halves of K per stage: 32, or 64 (fewer barriers and K-tiles, twice the stage)
#endif
#ifndef MMA_PIPE
#define MMA_PIPE 0  // 1: fragments of the next k16 step (and of the next K-tile) loaded before this step's mma
#endif
#ifndef MMA_FAST
#define MMA_FAST 0  // 1: the interior K-tiles of interior blocks without edge guards (vec8 kernel, not with MMA_PIPE)
#endif
#define MMA_THREADS (32 * MMA_WARPS_M * MMA_WARPS_N)

typedef unsigned short hbits;  // raw FP16 bits: copies never need half arithmetic

#define MMA_WTM (MMA_BM / MMA_WARPS_M)  // warp tile rows
#define MMA_WTN (MMA_BN / MMA_WARPS_N)  // warp tile columns
#define MMA_A_STAGE (MMA_BM * MMA_BK)   // halves per stage
#define MMA_B_STAGE (MMA_BK * MMA_BN)
#define MMA_B_CHUNKS_PER_ROW (MMA_BN / 8)
#define MMA_A_CHUNKS_PER_ROW (MMA_BK / 8)
#define MMA_A_CHUNK_SHIFT (MMA_BK == 32 ? 2 : 3)  // log2(MMA_A_CHUNKS_PER_ROW)
#define MMA_KSTEPS (MMA_BK / 16)  // k16 steps per K-tile

static_assert(MMA_WTM % 16 == 0 && MMA_WTN % 16 == 0, "warp tiles are whole m16 x n16 blocks");
static_assert(MMA_BN % 64 == 0, "the B swizzle permutes groups of 8 chunks within a row");
static_assert(MMA_BK == 32 || MMA_BK == 64, "the A swizzle is written for 64- and 128-byte rows");
static_assert(!MMA_PIPE || MMA_STAGES >= 2, "the pipelined loop refills a stage once its fragments are in registers");
static_assert((MMA_BM * MMA_A_CHUNKS_PER_ROW) % MMA_THREADS == 0 && (MMA_BK * MMA_B_CHUNKS_PER_ROW) % MMA_THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
static_assert(MMA_THREADS % MMA_B_CHUNKS_PER_ROW == 0 && MMA_THREADS % MMA_A_CHUNKS_PER_ROW == 0,
              "a thread copies the same A and B columns in every row it copies");
static_assert(MMA_STAGES >= 2, "the ring needs a stage being filled and one being read");
static_assert(!(MMA_FAST && MMA_PIPE), "MMA_FAST is the plain loop's");

// Halves from the start of a stage's A tile to chunk `chunk` (0..3, 8 halves each) of row `row`. With MMA_BK = 64
// rows are 128 bytes (chunks 0..7) and chunk c of row r is stored at c ^ (r & 7), as in the B tile.
__device__ __forceinline__ int mma_a_offset(int row, int chunk) {
#if MMA_BK == 32
    return (row * 4 + (chunk ^ ((row >> 1) & 3))) * 8;
#else
    return (row * MMA_A_CHUNKS_PER_ROW + (chunk ^ (row & 7))) * 8;
#endif
}

// Halves from the start of a stage's B tile to chunk `chunk` of k-row `row`.
__device__ __forceinline__ int mma_b_offset(int row, int chunk) {
    return (row * MMA_B_CHUNKS_PER_ROW + (chunk ^ (row & 7))) * 8;
}

__device__ __forceinline__ float mma_h2f(hbits h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ hbits mma_f2h(float f) {
    hbits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Eight halves p[0..7], at columns col .. col+7 of their row, into the 16-byte shared slot dst: zeros past
// `limit` or when !row_ok (p is not dereferenced then). `valid`: any address inside the matrix, for
// copies that read nothing.
template <bool VEC>
__device__ __forceinline__ void mma_copy8(hbits* dst, const hbits* p, int col, int limit, bool row_ok,
                                          const hbits* valid) {
    const int avail = row_ok ? max(0, min(8, limit - col)) : 0;
    if (VEC) {
        cp_async16(dst, avail ? p : valid, 2 * avail);
        return;
    }
    unsigned int w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        if (e < avail) w[e >> 1] |= (unsigned int)p[e] << ((e & 1) * 16);
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void ldmatrix_x4(unsigned int addr, unsigned int (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int addr, unsigned int (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col), FP32 accumulators.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                                             unsigned int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// row[col], row[col+1] = v0, v1 (+ beta * old), inside the matrix only; beta == 0 never reads.
template <bool VEC>
__device__ __forceinline__ void mma_store2(hbits* row, int col, int limit, float v0, float v1, float beta) {
    if (VEC && col + 1 < limit) {  // col is even and the row 16-byte aligned: one 32-bit store
        unsigned int* p = reinterpret_cast<unsigned int*>(row + col);
        if (beta != 0.f) {
            const unsigned int old = *p;
            v0 = fmaf(beta, mma_h2f((hbits)(old & 0xffffu)), v0);
            v1 = fmaf(beta, mma_h2f((hbits)(old >> 16)), v1);
        }
        *p = (unsigned int)mma_f2h(v0) | ((unsigned int)mma_f2h(v1) << 16);
        return;
    }
    const float v[2] = {v0, v1};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        if (col + e < limit) {
            float out = v[e];
            if (beta != 0.f) out = fmaf(beta, mma_h2f(row[col + e]), out);
            row[col + e] = mma_f2h(out);
        }
    }
}

template <bool VEC>
__device__ __forceinline__ void mma_hgemm_impl(int M, int N, int K, float alpha, const hbits* __restrict__ A,
                                               int lda, const hbits* __restrict__ B, int ldb, float beta,
                                               hbits* __restrict__ C, int ldc) {
#if __CUDA_ARCH__ >= 800
    constexpr int MI = MMA_WTM / 16;  // m16 tiles per warp
    constexpr int NI = MMA_WTN / 8;   // n8 tiles per warp
    constexpr int A_COPIES = MMA_BM * MMA_A_CHUNKS_PER_ROW / MMA_THREADS;
    constexpr int B_COPIES = MMA_BK * MMA_B_CHUNKS_PER_ROW / MMA_THREADS;
    extern __shared__ __align__(128) hbits mma_smem[];
    hbits* const As = mma_smem;                             // [MMA_STAGES][MMA_A_STAGE], swizzled
    hbits* const Bs = mma_smem + MMA_STAGES * MMA_A_STAGE;  // [MMA_STAGES][MMA_B_STAGE], swizzled

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int wm = warp / MMA_WARPS_N;
    const int wn = warp % MMA_WARPS_N;
    const int bm = blockIdx.y * MMA_BM;
    const int bn = blockIdx.x * MMA_BN;

    // Copies: A chunk c = tid + i * THREADS is row c / 4, chunk c % 4; B chunk c is k-row c / (BN/8),
    // chunk c % (BN/8). Consecutive threads copy consecutive 16-byte chunks of global memory. A thread's
    // chunk column is the same for every i, its rows step by A_ROW_STEP (B_ROW_STEP), a multiple of 8,
    // so its shared offsets step by whole swizzle periods.
    constexpr int A_ROW_STEP = MMA_THREADS / MMA_A_CHUNKS_PER_ROW;
    constexpr int B_ROW_STEP = MMA_THREADS / MMA_B_CHUNKS_PER_ROW;
    static_assert(A_ROW_STEP % 8 == 0 && B_ROW_STEP % 8 == 0, "copies keep their swizzle phase");
    const int a_row = tid >> MMA_A_CHUNK_SHIFT;
    const int a_col = (tid & (MMA_A_CHUNKS_PER_ROW - 1)) * 8;
    const int b_row = tid / MMA_B_CHUNKS_PER_ROW;
    const int b_col = (tid % MMA_B_CHUNKS_PER_ROW) * 8;
    const int a_dst = mma_a_offset(a_row, tid & (MMA_A_CHUNKS_PER_ROW - 1));
    const int b_dst = mma_b_offset(b_row, tid % MMA_B_CHUNKS_PER_ROW);
    unsigned int a_rows_ok = 0;  // bit i: row a_row + i * A_ROW_STEP of this block is inside A
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) a_rows_ok |= (bm + a_row + i * A_ROW_STEP < M) << i;
    const hbits* a_src = A + (size_t)min(bm + a_row, M - 1) * lda + a_col;  // walks K with the copies
    const hbits* b_src = B + (size_t)b_row * ldb + bn + b_col;              // walks K with the copies
    const size_t a_step = (size_t)A_ROW_STEP * lda;
    const size_t b_step = (size_t)B_ROW_STEP * ldb;

    auto load_tile = [&](int stage, int k0) {  // K-tile at k0 into `stage`; advances a_src, b_src past it
        hbits* as = As + stage * MMA_A_STAGE + a_dst;
        hbits* bs = Bs + stage * MMA_B_STAGE + b_dst;
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i)
            mma_copy8<VEC>(as + i * A_ROW_STEP * MMA_BK, a_src + i * a_step, k0 + a_col, K, (a_rows_ok >> i) & 1, A);
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i)
            mma_copy8<VEC>(bs + i * B_ROW_STEP * MMA_BN, b_src + i * b_step, bn + b_col, N,
                           k0 + b_row + i * B_ROW_STEP < K, B);
        a_src += MMA_BK;
        b_src += (size_t)MMA_BK * ldb;
    };

    // ldmatrix addresses (bytes from a stage's start). A, x4 for m16 tile mi and k16 step h: lane l gives
    // row (l & 15), chunk 2h + (l >> 4), i.e. matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15),
    // (8-15, 8-15) = the a0..a3 registers of m16n8k16. One m16 tile further is 16 rows = 1024 bytes, the
    // swizzle being periodic in 8 rows. B, x4.trans for n16 block j and step h: lane l gives k-row
    // 16h + (l & 15), chunk (warp's first column + 16j) / 8 + (l >> 4): matrices (k 0-7, n 0-7),
    // (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = b0, b1 of n8 tile 2j, then b0, b1 of tile 2j + 1.
    unsigned int a_addr[MMA_KSTEPS];
#pragma unroll
    for (int h = 0; h < MMA_KSTEPS; ++h) a_addr[h] = 2 * mma_a_offset(wm * MMA_WTM + (lane & 15), 2 * h + (lane >> 4));
    unsigned int b_addr[NI / 2];
#pragma unroll
    for (int j = 0; j < NI / 2; ++j) b_addr[j] = 2 * mma_b_offset(lane & 15, (wn * MMA_WTN + 16 * j) / 8 + (lane >> 4));
    const unsigned int as_base = smem_u32(As);
    const unsigned int bs_base = smem_u32(Bs);

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.f;

#if !MMA_PIPE
    const int ktiles = (K + MMA_BK - 1) / MMA_BK;
#pragma unroll
    for (int s = 0; s < MMA_STAGES - 1; ++s) {
        if (s < ktiles) load_tile(s, s * MMA_BK);
        cp_async_commit();
    }
    int cur = 0;                 // stage read in this iteration
    int ahead = MMA_STAGES - 1;  // stage that receives K-tile kt + STAGES - 1 (read in iteration kt - 1)
#if !MMA_FAST
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<MMA_STAGES - 2>();  // this thread's copies of K-tile kt have landed
        __syncthreads();                  // everyone's have, and every warp is done with iteration kt - 1
        if (kt + MMA_STAGES - 1 < ktiles) load_tile(ahead, (kt + MMA_STAGES - 1) * MMA_BK);
        cp_async_commit();

        const unsigned int a_stage = as_base + cur * MMA_A_STAGE * 2;
        const unsigned int b_stage = bs_base + cur * MMA_B_STAGE * 2;
#pragma unroll
        for (int h = 0; h < MMA_KSTEPS; ++h) {
            unsigned int af[MI][4];
            unsigned int bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a_stage + a_addr[h] + mi * 16 * MMA_BK * 2, af[mi]);
#pragma unroll
            for (int j = 0; j < NI / 2; ++j) {
                unsigned int r[4];
                ldmatrix_x4_trans(b_stage + b_addr[j] + h * 16 * MMA_BN * 2, r);
                bf[2 * j][0] = r[0];
                bf[2 * j][1] = r[1];
                bf[2 * j + 1][0] = r[2];
                bf[2 * j + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_m16n8k16(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
        cur = cur + 1 == MMA_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == MMA_STAGES ? 0 : ahead + 1;
    }
#else  // MMA_FAST: the same loop, its interior K-tiles first without guards
    // The MMA_KSTEPS k16 steps of one stage: ldmatrix and mma (byte addresses of its A and B tiles in the shared window).
    auto mma_stage = [&](unsigned int a_stage, unsigned int b_stage) {
#pragma unroll
        for (int h = 0; h < MMA_KSTEPS; ++h) {
            unsigned int af[MI][4];
            unsigned int bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a_stage + a_addr[h] + mi * 16 * MMA_BK * 2, af[mi]);
#pragma unroll
            for (int j = 0; j < NI / 2; ++j) {
                unsigned int r[4];
                ldmatrix_x4_trans(b_stage + b_addr[j] + h * 16 * MMA_BN * 2, r);
                bf[2 * j][0] = r[0];
                bf[2 * j][1] = r[1];
                bf[2 * j + 1][0] = r[2];
                bf[2 * j + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_m16n8k16(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
    };
    int kt = 0;
    if constexpr (VEC) {
        // K-tiles kt < fast_end copy K-tile kt + STAGES - 1, wholly inside K, and the block's rows and columns lie
        // inside M and N: every copy reads 16 bytes of the matrix. Whole turns of the ring, so that every stage index
        // is a constant; after them kt is a multiple of MMA_STAGES and cur, ahead still hold 0, STAGES - 1.
        const int fast_end = bm + MMA_BM <= M && bn + MMA_BN <= N ? K / MMA_BK - (MMA_STAGES - 1) : 0;
        hbits* const a_dst_base = As + a_dst;
        hbits* const b_dst_base = Bs + b_dst;
        const size_t b_ktile = (size_t)MMA_BK * ldb;
        for (; kt + MMA_STAGES <= fast_end; kt += MMA_STAGES) {
#pragma unroll
            for (int s = 0; s < MMA_STAGES; ++s) {  // K-tile kt + s, in stage s
                const int fill = (s + MMA_STAGES - 1) % MMA_STAGES;  // receives K-tile kt + s + STAGES - 1
                cp_async_wait<MMA_STAGES - 2>();
                __syncthreads();
#pragma unroll
                for (int i = 0; i < A_COPIES; ++i)
                    cp_async16(a_dst_base + fill * MMA_A_STAGE + i * A_ROW_STEP * MMA_BK, a_src + i * a_step, 16);
#pragma unroll
                for (int i = 0; i < B_COPIES; ++i)
                    cp_async16(b_dst_base + fill * MMA_B_STAGE + i * B_ROW_STEP * MMA_BN, b_src + i * b_step, 16);
                a_src += MMA_BK;
                b_src += b_ktile;
                cp_async_commit();
                mma_stage(as_base + s * MMA_A_STAGE * 2, bs_base + s * MMA_B_STAGE * 2);
            }
        }
    }
    for (; kt < ktiles; ++kt) {  // the guarded loop: edge blocks, the last K-tiles, the scalar kernel
        cp_async_wait<MMA_STAGES - 2>();
        __syncthreads();
        if (kt + MMA_STAGES - 1 < ktiles) load_tile(ahead, (kt + MMA_STAGES - 1) * MMA_BK);
        cp_async_commit();
        mma_stage(as_base + cur * MMA_A_STAGE * 2, bs_base + cur * MMA_B_STAGE * 2);
        cur = cur + 1 == MMA_STAGES ? 0 : cur + 1;
        ahead = ahead + 1 == MMA_STAGES ? 0 : ahead + 1;
    }
#endif  // MMA_FAST
    cp_async_wait<0>();
#else  // MMA_PIPE
    // Fragments of k16 step h of the stage at (a_stage, b_stage): A x4 per m16 tile, B x4.trans per n16 block.
    // a_addr[h] == a_addr[0] ^ (h << 5) for both swizzles (logical chunk 2h + (l >> 4) = 2h ^ (l >> 4), and the
    // swizzle XORs the chunk with bits of the row): one register instead of MMA_KSTEPS.
    auto load_frags = [&](unsigned int a_stage, unsigned int b_stage, int h, unsigned int (&af)[MI][4],
                          unsigned int (&bf)[NI][2]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a_stage + (a_addr[0] ^ (h << 5)) + mi * 16 * MMA_BK * 2, af[mi]);
#pragma unroll
        for (int j = 0; j < NI / 2; ++j) {
            unsigned int r[4];
            ldmatrix_x4_trans(b_stage + b_addr[j] + h * 16 * MMA_BN * 2, r);
            bf[2 * j][0] = r[0];
            bf[2 * j][1] = r[1];
            bf[2 * j + 1][0] = r[2];
            bf[2 * j + 1][1] = r[3];
        }
    };
    static_assert(MMA_KSTEPS % 2 == 0, "the next K-tile's first fragments land in fragment set 0");
    // Every stage holds a K-tile: K-tiles 0 .. STAGES-1 are in flight from the start. In the last k16 step of
    // K-tile kt the thread waits for K-tile kt + 1, passes the barrier (after which no warp reads kt's stage:
    // its last fragments are in registers), refills kt's stage with K-tile kt + STAGES and loads the first
    // fragments of kt + 1, all before the step's mma: the tensor cores never wait for a barrier or an ldmatrix
    // that a warp could have issued earlier.
    const int ktiles = (K + MMA_BK - 1) / MMA_BK;
#pragma unroll
    for (int s = 0; s < MMA_STAGES; ++s) {
        if (s < ktiles) load_tile(s, s * MMA_BK);
        cp_async_commit();
    }
    unsigned int af[2][MI][4];
    unsigned int bf[2][NI][2];
    cp_async_wait<MMA_STAGES - 1>();  // K-tile 0 has landed
    __syncthreads();
    load_frags(as_base, bs_base, 0, af[0], bf[0]);
    int cur = 0;  // stage of K-tile kt
    for (int kt = 0; kt < ktiles; ++kt) {
        const unsigned int a_stage = as_base + cur * MMA_A_STAGE * 2;
        const unsigned int b_stage = bs_base + cur * MMA_B_STAGE * 2;
        const int nxt = cur + 1 == MMA_STAGES ? 0 : cur + 1;
#pragma unroll
        for (int h = 0; h < MMA_KSTEPS; ++h) {
            if (h + 1 < MMA_KSTEPS) {
                load_frags(a_stage, b_stage, h + 1, af[(h + 1) & 1], bf[(h + 1) & 1]);
            } else if (kt + 1 < ktiles) {
                cp_async_wait<MMA_STAGES - 2>();  // this thread's copies of K-tile kt + 1 have landed
                __syncthreads();                  // everyone's have; no warp reads K-tile kt's stage any more
                if (kt + MMA_STAGES < ktiles) load_tile(cur, (kt + MMA_STAGES) * MMA_BK);
                cp_async_commit();
                load_frags(as_base + nxt * MMA_A_STAGE * 2, bs_base + nxt * MMA_B_STAGE * 2, 0, af[0], bf[0]);
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    mma_m16n8k16(acc[mi][ni], af[h & 1][mi], bf[h & 1][ni][0], bf[h & 1][ni][1]);
        }
        cur = nxt;
    }
    cp_async_wait<0>();
#endif  // MMA_PIPE

    // Accumulator (mi, ni) of lane l holds rows l/4 and l/4 + 8 of its m16 tile, columns 2 (l % 4) + {0, 1}
    // of its n8 tile: registers 0, 1 and 2, 3.
    const int row0 = bm + wm * MMA_WTM + (lane >> 2);
    const int col0 = bn + wn * MMA_WTN + 2 * (lane & 3);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = row0 + mi * 16 + half * 8;
            if (row < M) {
                hbits* c_row = C + (size_t)row * ldc;
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    mma_store2<VEC>(c_row, col0 + ni * 8, N, alpha * acc[mi][ni][2 * half],
                                    alpha * acc[mi][ni][2 * half + 1], beta);
            }
        }
    }
#else
    __trap();  // the host plans this kernel only for sm_80 and newer
#endif
}

// grid (ceil(N/MMA_BN), ceil(M/MMA_BM)), block MMA_THREADS, dynamic shared memory
// MMA_STAGES * (MMA_A_STAGE + MMA_B_STAGE) * 2 bytes. VEC: A, B, C 16-byte aligned and lda, ldb, ldc % 8 == 0.
extern "C" __global__ void __launch_bounds__(MMA_THREADS, MMA_MIN_BLOCKS)
mma_hgemm_vec8(int M, int N, int K, float alpha, const hbits* __restrict__ A, int lda,
               const hbits* __restrict__ B, int ldb, float beta, hbits* __restrict__ C, int ldc) {
    mma_hgemm_impl<true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The scalar fallback: any alignment, any leading dimension.
extern "C" __global__ void __launch_bounds__(MMA_THREADS, MMA_MIN_BLOCKS)
mma_hgemm_scalar(int M, int N, int K, float alpha, const hbits* __restrict__ A, int lda,
                 const hbits* __restrict__ B, int ldb, float beta, hbits* __restrict__ C, int ldc) {
    mma_hgemm_impl<false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
