// cudaemu.h: just enough of CUDA, as C++17, to run the kernels codegen/cuda
// emits on the CPU (clang++ -std=c++17 -pthread -include cudaemu.h), so that
// Linux CI without a GPU can check them against ir/eval:
//
//   - one std::thread per CUDA thread of a block; the blocks of a grid run
//     one after another (cudaemu::launch below);
//   - threadIdx, blockIdx, blockDim and gridDim are thread-local, set by
//     the launcher for each emulated thread;
//   - __syncthreads is a real barrier over the block's threads;
//   - __shfl_sync, __shfl_down_sync and __shfl_xor_sync exchange values
//     among the 32 threads of a warp through a barrier-synchronised slot
//     array (each warp has its own barrier, so warps run independently, as
//     on the GPU); only the full mask is accepted, which is all the emitter
//     uses;
//   - __shared__ variables are function-scope statics: one instance, shared
//     by the threads of the block that runs (right because one block runs
//     at a time; it would be wrong for concurrent blocks);
//   - the library's inline-PTX half conversions are replaced through the
//     MINERVA_CUDA_EMU hook of the emitted prelude by cudaemu::h2f/f2h
//     (IEEE binary16, round-to-nearest-even, as cvt.rn.f16.f32).
//
// Non-uniform control flow around a barrier or a full-mask shuffle (a
// thread that has returned, or a lane that never arrives) is reported and
// aborts the run instead of hanging or returning stale values. What this
// cannot check: the GPU's memory model beyond barriers, fast-math
// differences, occupancy, and anything only NVRTC/ptxas sees (the PTX
// compile test covers the source; this covers the arithmetic).
#ifndef CUDAEMU_H
#define CUDAEMU_H

#include <math.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define MINERVA_CUDA_EMU 1

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace cudaemu {
// h2f converts IEEE binary16 bits to float (exact).
inline float h2f(unsigned short h) {
    uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
    uint32_t out;
    if (exp == 0) {
        if (man == 0) {
            out = sign;
        } else { // subnormal: normalise
            int e = -1;
            do {
                ++e;
                man <<= 1;
            } while ((man & 1024) == 0);
            out = sign | uint32_t(127 - 15 - e) << 23 | (man & 1023) << 13;
        }
    } else if (exp == 31) {
        out = sign | 0x7f800000u | man << 13;
    } else {
        out = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &out, 4);
    return f;
}

// f2h converts float to binary16 bits, rounding to nearest even.
inline unsigned short f2h(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { // inf or nan
        return (unsigned short)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    }
    if (ax >= 0x477ff000u) { // rounds to >= 65520: infinity
        return (unsigned short)(sign | 0x7c00);
    }
    if (ax < 0x38800000u) { // below the smallest normal: subnormal or zero
        float a;
        std::memcpy(&a, &ax, 4);
        return (unsigned short)(sign | uint32_t(std::nearbyint(a * 16777216.0f))); // a / 2^-24, RNE
    }
    uint32_t r = ax + 0xfff + ((ax >> 13) & 1) - 0x38000000u; // rebias, RNE
    return (unsigned short)(sign | (r >> 13));
}

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "cudaemu: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

// Barrier is a reusable barrier for n threads (C++17 has no std::barrier).
// A thread that leaves (its kernel returned) makes any wait on the barrier,
// then or later, fail: a barrier or full-mask shuffle that not all threads
// reach is a kernel bug (undefined behaviour on the GPU).
struct Barrier {
    explicit Barrier(unsigned n, const char* what) : n(n), what(what) {}
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        if (left > 0) {
            report();
        }
        const unsigned long gen = generation;
        if (++arrived == n) {
            arrived = 0;
            ++generation;
            cv.notify_all();
            return;
        }
        if (!cv.wait_for(lk, std::chrono::seconds(60), [&] { return generation != gen || left > 0; })) {
            fail("barrier timed out after 60 s (a thread never arrived)");
        }
        if (generation == gen) {
            report();
        }
    }
    void leave() {
        std::lock_guard<std::mutex> lk(mu);
        ++left;
        cv.notify_all();
    }
    [[noreturn]] void report() {
        char msg[200];
        std::snprintf(msg, sizeof msg, "%s: a thread returned while others wait (non-uniform control flow)", what);
        fail(msg);
    }
    unsigned n, arrived = 0, left = 0;
    unsigned long generation = 0;
    const char* what;
    std::mutex mu;
    std::condition_variable cv;
};

// Warp is the exchange area of 32 lanes.
struct Warp {
    Barrier bar{32, "__shfl_*_sync or __syncwarp"};
    uint64_t slots[32];
};

// The block and warp the calling emulated thread belongs to.
inline thread_local Barrier* tl_block;
inline thread_local Warp* tl_warp;
inline thread_local unsigned tl_lane;

// shfl returns the value lane src(lane) passed to the same shuffle, or the
// caller's own where src returns 32 or more (out of the warp).
template <class T, class Src>
inline T shfl(unsigned mask, T v, Src src) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    if (mask != 0xffffffffu) {
        fail("a shuffle with a partial mask (the emulation supports the full mask only)");
    }
    Warp* w = tl_warp;
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    w->slots[tl_lane] = bits;
    w->bar.wait();
    const unsigned from = src(tl_lane);
    T r = v;
    if (from < 32) {
        std::memcpy(&r, &w->slots[from], sizeof r);
    }
    w->bar.wait(); // nobody overwrites a slot before everyone has read
    return r;
}

// launch runs fn once per thread of a grid of blocks of `block` threads
// (blockDim.x only: the emitter uses 1-D blocks whose size is a multiple of
// 32): the blocks in order x fastest, each on the block.x threads of a
// persistent pool (Pool below) with a fresh block barrier and warp exchange
// areas.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& fn);
} // namespace cudaemu

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

#include <csignal>
#include <map>
#include <pthread.h>

namespace cudaemu {
// Pool is a set of n persistent worker threads, one per thread of a block
// of n: creating n std::threads per block cost more than running most
// blocks (about 150 us each on a loaded 2-core machine), so launch creates
// each pool once per block size and reuses it for every block of every
// launch. The master (the launching thread) publishes one block at a time
// and waits until all n workers have run it; the blocks still run one after
// another, so __shared__ statics stay right.
struct Pool {
    explicit Pool(unsigned n) : n(n) {
        // The workers block asynchronous signals: when this runs inside a Go
        // process (the emulated CUDA driver), a process-directed signal such
        // as SIGCHLD or SIGURG must reach a Go thread, never a thread the Go
        // runtime does not know. Synchronous faults (a kernel touching a
        // guard page) still kill the process.
        sigset_t all, old;
        sigfillset(&all);
        for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) {
            sigdelset(&all, s);
        }
        pthread_sigmask(SIG_SETMASK, &all, &old);
        for (unsigned tid = 0; tid < n; ++tid) {
            std::thread(&Pool::work, this, tid).detach();
        }
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }

    // run runs block idx of the launch with a fresh block barrier and fresh
    // warp exchange areas, and returns when every thread has returned.
    void run(dim3 grid, dim3 block, uint3 idx, const std::function<void()>& fn) {
        Barrier bar(n, "__syncthreads");
        std::vector<Warp> warps(n / 32);
        {
            std::lock_guard<std::mutex> lk(mu);
            job = Job{grid, block, idx, &fn, &bar, warps.data()};
            running = n;
            ++generation;
        }
        start.notify_all();
        std::unique_lock<std::mutex> lk(mu);
        done.wait(lk, [&] { return running == 0; });
    }

    void work(unsigned tid) {
        unsigned long seen = 0;
        for (;;) {
            Job j;
            {
                std::unique_lock<std::mutex> lk(mu);
                start.wait(lk, [&] { return generation != seen; });
                seen = generation;
                j = job;
            }
            threadIdx = uint3{tid, 0, 0};
            blockIdx = j.idx;
            blockDim = j.block;
            gridDim = j.grid;
            tl_block = j.bar;
            tl_warp = &j.warps[tid / 32];
            tl_lane = tid % 32;
            (*j.fn)();
            tl_warp->bar.leave();
            tl_block->leave();
            std::lock_guard<std::mutex> lk(mu);
            if (--running == 0) {
                done.notify_one();
            }
        }
    }

    struct Job {
        dim3 grid, block;
        uint3 idx;
        const std::function<void()>* fn;
        Barrier* bar;
        Warp* warps;
    };
    const unsigned n;
    std::mutex mu;
    std::condition_variable start, done;
    Job job{};
    unsigned running = 0;
    unsigned long generation = 0;
};
} // namespace cudaemu

inline void cudaemu::launch(dim3 grid, dim3 block, const std::function<void()>& fn) {
    if (block.y != 1 || block.z != 1 || block.x == 0 || block.x % 32 != 0) {
        fail("blocks must be 1-D with a multiple of 32 threads");
    }
    // One launch at a time per process image: a pool runs one block at a
    // time, and __shared__ statics would be shared by concurrent launches.
    // The pools are never destroyed (their threads are detached and parked),
    // so nothing runs at exit; a module holding pools must not be unloaded.
    static std::mutex* mu = new std::mutex;
    static auto* pools = new std::map<unsigned, Pool*>;
    std::lock_guard<std::mutex> lk(*mu);
    Pool*& p = (*pools)[block.x];
    if (p == nullptr) {
        p = new Pool(block.x);
    }
    for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
            for (unsigned x = 0; x < grid.x; ++x) {
                p->run(grid, block, uint3{x, y, z}, fn);
            }
        }
    }
}

inline void __syncthreads() { cudaemu::tl_block->wait(); }

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src) {
    return cudaemu::shfl(mask, v, [src](unsigned) { return unsigned(src) & 31u; });
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
    return cudaemu::shfl(mask, v, [delta](unsigned lane) { return lane + delta; });
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int m) {
    return cudaemu::shfl(mask, v, [m](unsigned lane) { return (lane ^ unsigned(m)) & 31u; });
}

// __syncwarp waits for the 32 lanes of the warp on the shuffles' barrier
// (its mutex orders the lanes' shared-memory writes before their reads);
// like the shuffles it takes the full mask only, and a lane that returned
// instead of arriving is reported.
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) {
        cudaemu::fail("__syncwarp with a partial mask (the emulation supports the full mask only)");
    }
    cudaemu::tl_warp->bar.wait();
}

namespace cudaemu {
// ld_aligned stands in for the library's vector loads (ld.global.nc.v4):
// a load of a whole T that fails, as the GPU would, unless p is aligned to
// T (the emulation's buffers are malloc'd, 16-byte aligned like the
// runtime's 256-byte aligned ones, so a misaligned row or chunk shows).
template <class T>
inline T ld_aligned(const T* p) {
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0) {
        fail("a vector load from a misaligned address");
    }
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
} // namespace cudaemu

inline float __uint_as_float(unsigned x) {
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
inline unsigned __float_as_uint(float x) {
    unsigned u;
    std::memcpy(&u, &x, 4);
    return u;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

namespace cudaemu {
// Buf is a buffer read from and written back to a file.
struct Buf {
    std::vector<unsigned char> data;
    // ptr converts to whatever pointer the kernel parameter wants.
    struct Ptr {
        void* p;
        template <class T>
        operator T*() const { return static_cast<T*>(p); }
    };
    Ptr ptr() { return Ptr{data.data()}; }
};

inline Buf load(const char* path) {
    Buf b;
    FILE* f = std::fopen(path, "rb");
    if (!f) {
        std::fprintf(stderr, "cudaemu: cannot open %s\n", path);
        std::exit(2);
    }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    b.data.resize(size_t(n));
    if (n > 0 && std::fread(b.data.data(), 1, size_t(n), f) != size_t(n)) {
        std::fprintf(stderr, "cudaemu: short read of %s\n", path);
        std::exit(2);
    }
    std::fclose(f);
    return b;
}

inline void save(const char* path, const Buf& b) {
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(b.data.data(), 1, b.data.size(), f) != b.data.size()) {
        std::fprintf(stderr, "cudaemu: cannot write %s\n", path);
        std::exit(2);
    }
    std::fclose(f);
}
} // namespace cudaemu

// Execution spaces and qualifiers: plain C++ on the CPU. Defined last, so
// that they cannot change the standard headers or the code above.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

#endif

// ===========================================================================
// Tensor-core section: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
// The emitted prelude's mma_16816 calls cudaemu::mma_16816 under
// MINERVA_CUDA_EMU. Kept apart (and after the header above, with its own
// guard) so that changes to cudaemu::launch stay independent of it; it uses
// only the per-warp barrier and the calling thread's warp and lane.
// ===========================================================================
#ifndef CUDAEMU_MMA_H
#define CUDAEMU_MMA_H

namespace cudaemu {
// MmaArea holds the fragments the 32 lanes of one warp pass to one mma.
struct MmaArea {
    uint32_t a[32][4];
    uint32_t b[32][2];
    float c[32][4];
};

// mma_area returns the exchange area of warp w (found under a lock once per
// thread and block, then cached). Warps live for one block; an area
// outlives its warp and may be reused by a later warp at the same address,
// which is fine: only warps alive together must not share one. (Only
// headers included above are used: the execution-space macros are defined
// by now.)
inline MmaArea* mma_area(Warp* w) {
    static thread_local Warp* cached_w = nullptr;
    static thread_local MmaArea* cached = nullptr;
    if (cached_w == w) {
        return cached;
    }
    static std::mutex mu;
    static std::vector<std::pair<Warp*, MmaArea*>> areas;
    std::lock_guard<std::mutex> lk(mu);
    MmaArea* found = nullptr;
    for (auto& e : areas) {
        if (e.first == w) {
            found = e.second;
        }
    }
    if (!found) {
        found = new MmaArea();
        areas.emplace_back(w, found);
    }
    cached_w = w;
    cached = found;
    return found;
}

// mma_16816 is D = A·B + C for the warp: A 16×16 (row-major, f16), B 16×8
// (K×N, "col": each column is contiguous in K, f16), C and D 16×8 f32. Every
// lane passes its fragments (a: four f16x2 registers, b: two, c: four f32)
// and gets its D fragment back in c. The layouts are those of the PTX ISA,
// section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point
// type", with groupID = lane >> 2 and threadID_in_group = lane % 4 (written
// g and q below); in an f16x2 register the lower-indexed element is in bits
// 0-15:
//   A: register r, half h holds a_i, i = 2r + h:
//      row = g (i in 0,1,4,5) or g + 8 (i in 2,3,6,7), i.e. g + 8·(r & 1);
//      col = 2q + (i & 1) (i < 4) or 2q + (i & 1) + 8 (i >= 4), i.e. 2q + h + 8·(r >> 1);
//   B: register r, half h holds b_i, i = 2r + h:
//      row (k) = 2q + (i & 1) (i < 2) or 2q + (i & 1) + 8 (i >= 2), i.e. 2q + h + 8r;
//      col (n) = g;
//   C, D: element i: row = g (i < 2) or g + 8 (i >= 2); col = 2q + (i & 1).
// Arithmetic: every product of two f16 values is exact in f32 (11 × 11
// significant bits, exponents in range), so each element is c + Σ_k a·b
// summed in f32 in k order. The hardware adds the 16 products and c with
// its own internal alignment and rounding, which may differ from this in
// the last bits of the f32 result; the kernels' error bounds allow for
// that (a few f32 ulps per mma against tolerances ≥ 1e-5).
inline void mma_16816(float* c, const uint32_t* a, const uint32_t* b) {
    Warp* w = tl_warp;
    const unsigned lane = tl_lane;
    MmaArea* m = mma_area(w);
    std::memcpy(m->a[lane], a, sizeof m->a[lane]);
    std::memcpy(m->b[lane], b, sizeof m->b[lane]);
    std::memcpy(m->c[lane], c, sizeof m->c[lane]);
    w->bar.wait(); // every lane's fragments are in
    float A[16][16], B[16][8], C[16][8];
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned g = l >> 2, q = l & 3;
        for (unsigned r = 0; r < 4; ++r) {
            for (unsigned h = 0; h < 2; ++h) {
                A[g + 8 * (r & 1)][2 * q + h + 8 * (r >> 1)] = h2f((unsigned short)(m->a[l][r] >> (16 * h)));
            }
        }
        for (unsigned r = 0; r < 2; ++r) {
            for (unsigned h = 0; h < 2; ++h) {
                B[2 * q + h + 8 * r][g] = h2f((unsigned short)(m->b[l][r] >> (16 * h)));
            }
        }
        for (unsigned i = 0; i < 4; ++i) {
            C[g + 8 * (i >> 1)][2 * q + (i & 1)] = m->c[l][i];
        }
    }
    w->bar.wait(); // nobody overwrites the area before everyone has read it
    const unsigned g = lane >> 2, q = lane & 3;
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = g + 8 * (i >> 1), col = 2 * q + (i & 1);
        float d = C[row][col];
        for (unsigned k = 0; k < 16; ++k) {
            d += A[row][k] * B[k][col];
        }
        c[i] = d;
    }
}
} // namespace cudaemu

#endif
