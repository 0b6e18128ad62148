// mslshim.h: just enough of the Metal Shading Language, as C++17, for the
// kernels codegen/metal emits, so that Linux CI can
//   1. type-check them: clang++ -std=c++17 -fsyntax-only -include mslshim.h
//      (any syntax or type error in an emitted kernel fails the test), and
//   2. run them on the CPU: one std::thread per Metal thread of a
//      threadgroup, a real barrier for threadgroup_barrier, and the simd_*
//      reductions done over the 32 threads of a simdgroup through that
//      barrier (mslemu::launch below).
// It declares only what the emitter uses; a kernel that needs more fails
// here first, which is the point. What it cannot check: Metal-only rules
// (address-space casts, argument-buffer limits, fast-math semantics), which
// only Apple's compiler sees.
#ifndef MSLSHIM_H
#define MSLSHIM_H

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

// The binary16 conversions and the buffer files the emulation mains use,
// shared with codegen/cuda's shim; buffers get 64 bytes of slack.
#define EMUHOST_LOAD_SLACK 64
#include "../../gpu/gputest/testdata/emuhost.h"

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

// half: IEEE binary16 storage (2 bytes, so device half* addresses real f16
// data), converting to and from float with round-to-nearest-even.
struct half {
    ushort bits;
    half() = default;
    half(float f) : bits(from_float(f)) {}
    operator float() const { return to_float(bits); }
    static float to_float(ushort h) { return emuhost::h2f(h); }
    static ushort from_float(float f) { return emuhost::f2h(f); }
};

struct float2 {
    float x, y;
    float2() = default;
    constexpr float2(float a, float b) : x(a), y(b) {}
};
struct uint2 {
    uint x, y;
    uint2() = default;
    constexpr uint2(uint a, uint b) : x(a), y(b) {}
};
struct uint3 {
    uint x, y, z;
    uint3() = default;
    constexpr uint3(uint a, uint b, uint c) : x(a), y(b), z(c) {}
};

template <class To, class From>
inline To as_type(From f) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
    To t;
    std::memcpy(&t, &f, sizeof t);
    return t;
}

namespace mslemu {
// Barrier is a reusable barrier for n threads (C++17 has no std::barrier).
struct Barrier {
    explicit Barrier(uint n) : n(n) {}
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        const unsigned long gen = generation;
        if (++arrived == n) {
            arrived = 0;
            ++generation;
            cv.notify_all();
            return;
        }
        cv.wait(lk, [&] { return generation != gen; });
    }
    uint n, arrived = 0;
    unsigned long generation = 0;
    std::mutex mu;
    std::condition_variable cv;
};

// The threadgroup a thread runs in, for the simdgroup reductions.
inline thread_local Barrier* tl_bar;
inline thread_local float* tl_slots;
inline thread_local uint tl_tid, tl_n;

// reduce combines x over the 32 threads of the caller's simdgroup. All
// threads of the threadgroup must call it together (the emitted kernels'
// control flow around simd_* is uniform, as Metal requires anyway).
template <class Op>
inline float reduce(float x, Op op) {
    tl_slots[tl_tid] = x;
    tl_bar->wait();
    const uint base = tl_tid & ~31u, end = std::min(base + 32, tl_n);
    float r = tl_slots[base];
    for (uint i = base + 1; i < end; ++i) {
        r = op(r, tl_slots[i]);
    }
    tl_bar->wait(); // nobody overwrites a slot before everyone has read
    return r;
}

// launch runs fn(threadgroup position, thread index in threadgroup, index in
// simdgroup, simdgroup index) for every thread of a (gx, gy, gz) grid of
// threadgroups of `threads` threads: one std::thread per Metal thread,
// walking the threadgroups in order with a barrier between them.
template <class F>
inline void launch(uint gx, uint gy, uint gz, uint threads, F fn) {
    Barrier bar(threads);
    std::vector<float> slots(threads);
    std::vector<std::thread> ts;
    for (uint tid = 0; tid < threads; ++tid) {
        ts.emplace_back([&, tid] {
            tl_bar = &bar;
            tl_slots = slots.data();
            tl_tid = tid;
            tl_n = threads;
            for (uint z = 0; z < gz; ++z) {
                for (uint y = 0; y < gy; ++y) {
                    for (uint x = 0; x < gx; ++x) {
                        fn(uint3(x, y, z), tid, tid % 32, tid / 32);
                        bar.wait();
                    }
                }
            }
        });
    }
    for (auto& t : ts) {
        t.join();
    }
}
} // namespace mslemu

// The metal namespace: the built-ins the kernels call, float overloads so
// the emulation computes in float as the GPU does.
namespace metal {
inline float exp(float x) { return std::exp(x); }
inline float cos(float x) { return std::cos(x); }
inline float sin(float x) { return std::sin(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float rint(float x) { return std::nearbyint(x); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
template <class T>
inline T max(T a, T b) { return a > b ? a : b; }
template <class T>
inline T min(T a, T b) { return a < b ? a : b; }
inline float simd_sum(float x) { return mslemu::reduce(x, [](float a, float b) { return a + b; }); }
inline float simd_max(float x) { return mslemu::reduce(x, [](float a, float b) { return a > b ? a : b; }); }
inline float simd_min(float x) { return mslemu::reduce(x, [](float a, float b) { return a < b ? a : b; }); }
enum class mem_flags { mem_none, mem_device, mem_threadgroup };
inline void threadgroup_barrier(mem_flags) { mslemu::tl_bar->wait(); }

// simdgroup_matrix (<metal_simdgroup_matrix>): on the GPU the 32 threads of
// a simdgroup hold an 8x8 matrix together, two elements each, and load,
// store and multiply_accumulate are simdgroup-wide operations that
// synchronise nothing beyond the simdgroup's own lockstep: data another
// thread wrote to threadgroup memory needs a threadgroup_barrier before
// simdgroup_load, and a simdgroup_store is seen by other threads only after
// one. Here every thread keeps the whole matrix (all 32 compute the same
// value from the same inputs), simdgroup_load reads all 64 elements itself,
// multiply_accumulate is local, and simdgroup_store writes only the two
// elements the calling lane owns (lane l: elements 2l and 2l+1 in row-major
// order; Metal leaves the distribution unspecified), so a lane that skips a
// store (divergent control flow), or a reader that skips the barrier, sees
// wrong or racy data, as it would on the GPU. No barrier is implied.
template <class T, int Cols, int Rows = Cols>
struct simdgroup_matrix {
    T e[Rows][Cols];
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

template <class T, int Cols, int Rows = Cols>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
    simdgroup_matrix<T, Cols, Rows> m;
    for (int r = 0; r < Rows; ++r) {
        for (int c = 0; c < Cols; ++c) {
            m.e[r][c] = value;
        }
    }
    return m;
}

// simdgroup_load: element (r, c) is src[r * elements_per_row + c].
template <class T, int Cols, int Rows>
inline void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, const T* src, ulong elements_per_row = Cols) {
    for (int r = 0; r < Rows; ++r) {
        for (int c = 0; c < Cols; ++c) {
            d.e[r][c] = src[ulong(r) * elements_per_row + ulong(c)];
        }
    }
}

// simdgroup_store: this lane's two elements of a to dst[r * elements_per_row + c].
template <class T, int Cols, int Rows>
inline void simdgroup_store(const simdgroup_matrix<T, Cols, Rows>& a, T* dst, ulong elements_per_row = Cols) {
    static_assert(Rows * Cols == 64, "the emulation's lane ownership assumes 8x8");
    const uint lane = mslemu::tl_tid % 32;
    for (uint i = 2 * lane; i < 2 * lane + 2; ++i) {
        const uint r = i / Cols, c = i % Cols;
        dst[ulong(r) * elements_per_row + ulong(c)] = a.e[r][c];
    }
}

// simdgroup_multiply_accumulate: d = a·b + c, in float.
template <class T, int N, int K, int M>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, N, M>& d, const simdgroup_matrix<T, K, M>& a,
                                          const simdgroup_matrix<T, N, K>& b, const simdgroup_matrix<T, N, M>& c) {
    simdgroup_matrix<T, N, M> out;
    for (int r = 0; r < M; ++r) {
        for (int col = 0; col < N; ++col) {
            T s = c.e[r][col];
            for (int k = 0; k < K; ++k) {
                s += a.e[r][k] * b.e[k][col];
            }
            out.e[r][col] = s;
        }
    }
    d = out;
}
} // namespace metal

// Address spaces and function qualifiers: plain C++ memory on the CPU.
// Defined last, so that they cannot change the standard headers or the code
// above (`thread` would break std::thread).
#define kernel extern "C"
#define device
#define constant
#define thread
// threadgroup memory is a function-scope static: shared by every thread of
// the group, which is right because mslemu::launch runs one threadgroup at a
// time (a static would be wrong for concurrent groups). Kernels may use it
// only for arrays declared at kernel scope: a `threadgroup T*` local would
// become one static pointer shared by all threads.
#define threadgroup static

#endif
