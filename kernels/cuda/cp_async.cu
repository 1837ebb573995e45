// Asynchronous global -> shared copies (cp.async, sm_80+) for the pipelined kernels; include-only.
//
// A copy of `bytes` < its size reads only those bytes and zero-fills the rest of the shared slot, so a
// tile that crosses a matrix edge is loaded with the same instruction as an inner one (bytes = 0 reads
// nothing: the source pointer then only has to be some valid address). Copies are grouped with
// cp_async_commit() and awaited with cp_async_wait<n>() (at most n groups of this thread still in
// flight); a __syncthreads() after the wait makes every thread's copies visible to the block.
// Before sm_80 the same calls copy synchronously, so the kernels still build and run there.

#ifndef GPUPERF_CP_ASYNC
#define GPUPERF_CP_ASYNC

__device__ __forceinline__ unsigned int smem_u32(const void* p) {
    return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// 16 bytes: dst and src 16-byte aligned, bytes in 0..16.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes)
                 : "memory");
#else
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (bytes == 16) {
        v = *reinterpret_cast<const uint4*>(src);
    } else {
        unsigned char* out = reinterpret_cast<unsigned char*>(&v);
        for (int i = 0; i < bytes; ++i) out[i] = reinterpret_cast<const unsigned char*>(src)[i];
    }
    *reinterpret_cast<uint4*>(dst) = v;
#endif
}

// 4 bytes (one float): dst and src 4-byte aligned, bytes 0 or 4.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes)
                 : "memory");
#else
    *reinterpret_cast<float*>(dst) = bytes ? *reinterpret_cast<const float*>(src) : 0.f;
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#endif  // GPUPERF_CP_ASYNC
