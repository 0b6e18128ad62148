// cudaprelude.h: what the CUDA toolkit's headers (or NVRTC's built-ins)
// give an emitted library, declared for clang's CUDA mode with -nocudainc
// (no CUDA installation here), so that the tests can compile every emitted
// library to PTX: `clang -x cuda --cuda-gpu-arch=sm_80 --cuda-device-only
// -nocudainc -nocudalib -include cudaprelude.h`.
//
// -nocudainc drops clang's __clang_cuda_runtime_wrapper.h, which would
// define the execution-space macros and include the built-in variables and
// intrinsics; we define the few the emitter uses. The math functions are
// declared only: -nocudalib links no libdevice, and PTX output leaves them
// as .extern calls (NVRTC resolves them against its own libdevice).
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

// threadIdx, blockIdx, blockDim, gridDim (clang's own header, in its
// resource directory, which -nocudainc leaves on the include path).
#include <__clang_cuda_builtin_vars.h>

// __syncthreads is a clang NVPTX builtin. The shuffles need PTX ISA 6.0+,
// which clang enables only for a CUDA version it detects; the tests pass
// -Xclang -target-feature -Xclang +ptx70 for that (sm_80 emits PTX 7.0).
static __device__ __forceinline__ float __shfl_down_sync(unsigned mask, float v, unsigned delta) {
    return __nvvm_shfl_sync_down_f32(mask, v, delta, 0x1f);
}
static __device__ __forceinline__ float __shfl_sync(unsigned mask, float v, int lane) {
    return __nvvm_shfl_sync_idx_f32(mask, v, lane, 0x1f);
}
static __device__ __forceinline__ float __shfl_xor_sync(unsigned mask, float v, int m) {
    return __nvvm_shfl_sync_bfly_f32(mask, v, m, 0x1f);
}
// __syncwarp: bar.warp.sync (PTX 6.0+, enabled by the same +ptx70).
static __device__ __forceinline__ void __syncwarp(unsigned mask = 0xffffffffu) { __nvvm_bar_warp_sync(mask); }
// The unsigned overloads (CUDA declares them for every 32- and 64-bit type)
// carry the indices of the arg-max reductions (topk_softmax, argmax).
static __device__ __forceinline__ unsigned __shfl_down_sync(unsigned mask, unsigned v, unsigned delta) {
    return (unsigned)__nvvm_shfl_sync_down_i32(mask, (int)v, delta, 0x1f);
}
static __device__ __forceinline__ unsigned __shfl_sync(unsigned mask, unsigned v, int lane) {
    return (unsigned)__nvvm_shfl_sync_idx_i32(mask, (int)v, lane, 0x1f);
}
static __device__ __forceinline__ unsigned __shfl_xor_sync(unsigned mask, unsigned v, int m) {
    return (unsigned)__nvvm_shfl_sync_bfly_i32(mask, (int)v, m, 0x1f);
}
static __device__ __forceinline__ float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
static __device__ __forceinline__ unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }

extern "C" {
__device__ float expf(float);
__device__ float rsqrtf(float);
__device__ float sinf(float);
__device__ float cosf(float);
__device__ float tanhf(float);
__device__ float fmaf(float, float, float);
__device__ float rintf(float);
__device__ float roundf(float);
__device__ float fmaxf(float, float);
__device__ float fminf(float, float);
}
