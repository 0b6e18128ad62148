// cudaemu.h: just enough of CUDA, as C++17, to run the kernels codegen/cuda
// emits on the CPU (clang++ -std=c++17 -pthread -include cudaemu.h), so that
// Linux CI without a GPU can check them against ir/eval:
//
//   - the blocks of a grid run one after another on the launching OS thread
//     (cudaemu::launch below); the CUDA threads of a block are fibers on
//     that thread, each with its own stack, switched cooperatively: a fiber
//     runs until it reaches a barrier or returns, then the next runnable
//     fiber runs. No other OS thread is involved, so a barrier costs one
//     context switch (a few registers) per participant instead of futex
//     wake-ups;
//   - threadIdx, blockIdx, blockDim and gridDim are globals the scheduler
//     sets for the fiber it switches to (launches are serialised);
//   - __syncthreads is a barrier over the block's threads;
//   - __shfl_sync, __shfl_down_sync and __shfl_xor_sync exchange values
//     among the 32 threads of a warp through slots and a per-warp barrier
//     (so warps proceed independently between block barriers, as on the
//     GPU); only the full mask is accepted, which is all the emitter uses;
//   - __shared__ variables are function-scope statics: one instance, shared
//     by the threads of the block that runs (right because one block runs
//     at a time; it would be wrong for concurrent blocks);
//   - the library's inline-PTX half conversions are replaced through the
//     MINERVA_CUDA_EMU hook of the emitted prelude by cudaemu::h2f/f2h
//     (IEEE binary16, round-to-nearest-even, as cvt.rn.f16.f32).
//
// Non-uniform control flow around a barrier or a full-mask shuffle (a
// thread that has returned while others wait, or threads waiting at
// barriers that can never complete) is reported and aborts the run instead
// of hanging or returning stale values. What this cannot check: the GPU's
// memory model beyond barriers (fibers interleave only at barriers, so a
// missing barrier between a shared-memory write and another thread's read
// shows only when the order of fibers matters), fast-math differences,
// occupancy, and anything only NVRTC/ptxas sees (the PTX compile test
// covers the source; this covers the arithmetic).
#ifndef CUDAEMU_H
#define CUDAEMU_H

#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <type_traits>
#include <vector>

// The binary16 conversions and the buffer files the emulation mains use,
// shared with codegen/metal's shim. The emulated CUDA driver keys its object
// cache on this file's text alone, so the line below pins emuhost.h's
// content (TestEmuHostPinned checks it):
// emuhost.h sha256 61ef2b89a84ff7bb7956072ae7b704c85f92c7d1fd3f8f6550bca19a2ef61d18
#include "../../gpu/gputest/testdata/emuhost.h"

// CUDAEMU_ASM_SWITCH: the hand-written context switch below, for x86-64
// and arm64; elsewhere, or with CUDAEMU_UCONTEXT defined (the tests build
// that path on amd64 too), ucontext.
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(CUDAEMU_UCONTEXT)
#define CUDAEMU_ASM_SWITCH 1
#else
#define CUDAEMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

#define MINERVA_CUDA_EMU 1

// Everything below is hidden in the object that includes this header: the
// emulated driver dlopens one object per module, and each must keep its
// own scheduler, fiber stacks and per-thread globals, never bind to
// another's.
#pragma GCC visibility push(hidden)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace cudaemu {
// h2f and f2h, IEEE binary16 conversions (round-to-nearest-even), are
// emuhost.h's.
using emuhost::f2h;
using emuhost::h2f;

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "cudaemu: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

struct Barrier;
// block_on switches the calling fiber out until barrier b, which it has
// entered at generation gen, releases (or a participant leaves it).
inline void block_on(Barrier* b, unsigned long gen);

// Barrier is a reusable barrier for n fibers of the running block. The
// last to arrive releases it and runs on; the others wait in block_on. A
// fiber that leaves (its kernel returned) makes any wait on the barrier,
// then or later, fail: a barrier or full-mask shuffle that not all threads
// reach is a kernel bug (undefined behaviour on the GPU).
struct Barrier {
    void reset(unsigned count, const char* name) {
        n = count;
        arrived = left = 0;
        generation = 0;
        what = name;
    }
    void wait() {
        if (left > 0) {
            report();
        }
        const unsigned long gen = generation;
        if (++arrived == n) {
            arrived = 0;
            ++generation;
            return;
        }
        block_on(this, gen);
        if (generation == gen) {
            report();
        }
    }
    void leave() { ++left; }
    [[noreturn]] void report() const {
        char msg[200];
        std::snprintf(msg, sizeof msg, "%s: a thread returned while others wait (non-uniform control flow)", what);
        fail(msg);
    }
    unsigned n = 0, arrived = 0, left = 0;
    unsigned long generation = 0;
    const char* what = "";
};

// MmaArea holds the fragments the 32 lanes of one warp pass to one
// mma_16816 (the tensor-core section at the end of this file), and the D
// the first lane to run after the barrier computes from them for all
// (ready: the barrier generation it was computed in). One area is enough:
// no lane can write fragments for the next mma before D is computed (the
// first lane to run after the barrier computes it), and D is replaced only
// after the next barrier, which every lane reaches after reading its part.
struct MmaArea {
    uint32_t a[32][4];
    uint32_t b[32][2];
    float c[32][4];
    float d[16][8];
    unsigned long ready;
};

// Warp is the exchange area of 32 lanes. The shuffle slots are
// double-buffered by the parity of the warp barrier's generation, so one
// barrier per shuffle is enough: a lane writes slots[p], p = generation & 1,
// before it arrives and reads them after the release (the last lane to
// arrive runs on at once, and may write its slot for the next shuffle
// before the others have read this one); it can write slots[p] again only
// after the next release, which needs every lane to have arrived there,
// i.e. to have read.
struct Warp {
    void reset() {
        bar.reset(32, "__shfl_*_sync, __syncwarp or mma_16816");
        mma.ready = ~0ul;
    }
    Barrier bar;
    uint64_t slots[2][32];
    MmaArea mma;
};

// The block barrier and the warp and lane of the running fiber (set by
// the scheduler, as threadIdx below).
inline Barrier* tl_block;
inline Warp* tl_warp;
inline unsigned tl_lane;

// shfl returns the value lane src(lane) passed to the same shuffle, or the
// caller's own where src returns 32 or more (out of the warp).
template <class T, class Src>
inline T shfl(unsigned mask, T v, Src src) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    if (mask != 0xffffffffu) {
        fail("a shuffle with a partial mask (the emulation supports the full mask only)");
    }
    Warp* w = tl_warp;
    const unsigned lane = tl_lane;
    uint64_t* slots = w->slots[w->bar.generation & 1];
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    slots[lane] = bits;
    w->bar.wait();
    const unsigned from = src(lane);
    T r = v;
    if (from < 32) {
        std::memcpy(&r, &slots[from], sizeof r);
    }
    return r;
}

// launch runs fn once per thread of a grid of blocks of `block` threads
// (blockDim.x only: the emitter uses 1-D blocks whose size is a multiple of
// 32): the blocks in order x fastest, each as block.x fibers (Sched below)
// with a fresh block barrier and warp exchange areas.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& fn);
} // namespace cudaemu

// The running fiber's indices, set by the scheduler at every switch (plain
// globals, not thread_local: launches are serialised, and a global costs a
// load where a thread_local in a dlopened object costs a __tls_get_addr
// call).
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace cudaemu {
// ---- fiber contexts ----
//
// ctx_switch(from, to) saves the running context in from and resumes to;
// ctx_init prepares a context that, resumed, calls entry on the stack
// [lo, lo+size). On x86-64 and arm64 a context is a stack pointer: the
// switch pushes the callee-saved registers of the ABI, swaps stack
// pointers and pops the other context's (glibc swapcontext would also make
// a sigprocmask system call per switch). The floating-point control state
// (MXCSR, x87 control word, FPCR) is callee-saved too but not switched:
// every fiber runs with the launching thread's, and kernels never change
// it. Other architectures use ucontext.
#if CUDAEMU_ASM_SWITCH
struct Ctx {
    void* sp = nullptr;
};

// fiber_switch stores the stack pointer, after pushing the callee-saved
// registers, in *from, then loads to and pops them from there; its return
// goes to wherever that context switched out (or to the entry a fresh one
// was given by ctx_init).
#if defined(__x86_64__)
__attribute__((naked, noinline)) inline void fiber_switch(void** /*from: rdi*/, void* /*to: rsi*/) {
    __asm__ volatile("pushq %rbp\n\t"
                     "pushq %rbx\n\t"
                     "pushq %r12\n\t"
                     "pushq %r13\n\t"
                     "pushq %r14\n\t"
                     "pushq %r15\n\t"
                     "movq %rsp, (%rdi)\n\t"
                     "movq %rsi, %rsp\n\t"
                     "popq %r15\n\t"
                     "popq %r14\n\t"
                     "popq %r13\n\t"
                     "popq %r12\n\t"
                     "popq %rbx\n\t"
                     "popq %rbp\n\t"
                     "ret\n\t");
}

// A fresh context's stack, from its 16-byte-aligned top down: a zero
// return address for entry (which never returns), entry itself (where the
// switch's ret goes) and six zero registers (rbp = 0 ends frame-pointer
// walks). After the ret, rsp is 8 below a multiple of 16, as right after
// a call, which is what the ABI promises a function on entry.
inline void ctx_init(Ctx& c, char* lo, size_t size, void (*entry)()) {
    uintptr_t* top = reinterpret_cast<uintptr_t*>(lo + size);
    top[-1] = 0;
    top[-2] = reinterpret_cast<uintptr_t>(entry);
    for (int i = 3; i <= 8; ++i) {
        top[-i] = 0;
    }
    c.sp = top - 8;
}
#else
__attribute__((naked, noinline)) inline void fiber_switch(void** /*from: x0*/, void* /*to: x1*/) {
    __asm__ volatile("sub sp, sp, #160\n\t"
                     "stp x19, x20, [sp, #0]\n\t"
                     "stp x21, x22, [sp, #16]\n\t"
                     "stp x23, x24, [sp, #32]\n\t"
                     "stp x25, x26, [sp, #48]\n\t"
                     "stp x27, x28, [sp, #64]\n\t"
                     "stp x29, x30, [sp, #80]\n\t"
                     "stp d8, d9, [sp, #96]\n\t"
                     "stp d10, d11, [sp, #112]\n\t"
                     "stp d12, d13, [sp, #128]\n\t"
                     "stp d14, d15, [sp, #144]\n\t"
                     "mov x9, sp\n\t"
                     "str x9, [x0]\n\t"
                     "mov sp, x1\n\t"
                     "ldp x19, x20, [sp, #0]\n\t"
                     "ldp x21, x22, [sp, #16]\n\t"
                     "ldp x23, x24, [sp, #32]\n\t"
                     "ldp x25, x26, [sp, #48]\n\t"
                     "ldp x27, x28, [sp, #64]\n\t"
                     "ldp x29, x30, [sp, #80]\n\t"
                     "ldp d8, d9, [sp, #96]\n\t"
                     "ldp d10, d11, [sp, #112]\n\t"
                     "ldp d12, d13, [sp, #128]\n\t"
                     "ldp d14, d15, [sp, #144]\n\t"
                     "add sp, sp, #160\n\t"
                     "ret\n\t");
}

// A fresh context's stack: the 160-byte register frame right under the
// 16-byte-aligned top, all zero but x30 (the link register the switch
// returns through) = entry; x29 = 0 ends frame-pointer walks. After the
// switch sp is the top, 16-byte aligned as the ABI requires.
inline void ctx_init(Ctx& c, char* lo, size_t size, void (*entry)()) {
    uintptr_t* top = reinterpret_cast<uintptr_t*>(lo + size);
    uintptr_t* frame = top - 20;
    for (int i = 0; i < 20; ++i) {
        frame[i] = 0;
    }
    frame[11] = reinterpret_cast<uintptr_t>(entry);
    c.sp = frame;
}
#endif

inline void ctx_switch(Ctx& from, Ctx& to) { fiber_switch(&from.sp, to.sp); }
#else
struct Ctx {
    ucontext_t uc;
};

inline void ctx_init(Ctx& c, char* lo, size_t size, void (*entry)()) {
    if (getcontext(&c.uc) != 0) {
        fail("getcontext failed");
    }
    c.uc.uc_stack.ss_sp = lo;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}

inline void ctx_switch(Ctx& from, Ctx& to) {
    if (swapcontext(&from.uc, &to.uc) != 0) {
        fail("swapcontext failed");
    }
}
#endif

// Fiber is one CUDA thread of the running block: its context while
// switched out, and the barrier (with the generation it entered) it waits
// at, if any.
struct Fiber {
    Ctx ctx;
    Barrier* bar;
    unsigned long gen;
    bool done;
};

// Sched runs the blocks of a launch, one at a time, as fibers on the
// launching thread. The fibers' stacks (kStack bytes each, a PROT_NONE
// guard page under each, so that an overflow faults instead of corrupting
// the neighbour) are mapped once, grown to the largest block seen, and
// reused by every block of every launch (two mappings per fiber: 2048 for
// a block of 1024, against Linux's default limit of 65530 per process, and
// only touched pages cost memory). Fibers switch directly to one
// another; the launcher's context is resumed when the block's last fiber
// returns.
struct Sched {
    static constexpr size_t kStack = size_t(256) << 10;

    // reserve maps stacks for n fibers if fewer are mapped.
    void reserve(unsigned n) {
        if (n <= cap) {
            return;
        }
        if (stacks != nullptr) {
            munmap(stacks, cap * stride);
            stacks = nullptr;
            cap = 0;
        }
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        stride = page + kStack;
        void* p = mmap(nullptr, n * stride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fail("cannot map the fibers' stacks");
        }
        stacks = static_cast<char*>(p);
        for (unsigned i = 0; i < n; ++i) {
            if (mprotect(stacks + i * stride, page, PROT_NONE) != 0) {
                fail("cannot protect a fiber stack's guard page");
            }
        }
        cap = n;
        guard = page;
    }

    // run runs block blockIdx of n threads and returns when all have
    // returned.
    void run(unsigned threads, const std::function<void()>* f) {
        n = threads;
        fn = f;
        reserve(n);
        fibers.resize(n);
        warps.resize(n / 32);
        block.reset(n, "__syncthreads");
        for (Warp& w : warps) {
            w.reset();
        }
        for (unsigned i = 0; i < n; ++i) {
            Fiber& fb = fibers[i];
            ctx_init(fb.ctx, stacks + i * stride + guard, kStack, &entry);
            fb.bar = nullptr;
            fb.gen = 0;
            fb.done = false;
        }
        live = n;
        tl_block = &block;
        resume(0, launcher);
    }

    // resume switches from the context saved in from to fiber j, setting
    // the per-thread globals to j's.
    void resume(unsigned j, Ctx& from) {
        cur = j;
        threadIdx = uint3{j, 0, 0};
        tl_lane = j & 31;
        tl_warp = &warps[j >> 5];
        ctx_switch(from, fibers[j].ctx);
    }

    bool runnable(const Fiber& f) const {
        return !f.done && (f.bar == nullptr || f.bar->generation != f.gen || f.bar->left > 0);
    }

    // next switches from the running fiber to the next runnable one in
    // round-robin order (usually the next thread), and reports a deadlock
    // if there is none.
    void next() {
        Fiber& me = fibers[cur];
        for (unsigned k = 1; k <= n; ++k) {
            const unsigned j = cur + k < n ? cur + k : cur + k - n;
            if (runnable(fibers[j])) {
                if (j != cur) {
                    resume(j, me.ctx);
                }
                return;
            }
        }
        deadlock();
    }

    void wait(Barrier* b, unsigned long gen) {
        Fiber& me = fibers[cur];
        me.bar = b;
        me.gen = gen;
        next();
        me.bar = nullptr;
    }

    // finish retires the running fiber, whose kernel returned: it leaves
    // its barriers (whoever waits there will report) and never runs again.
    [[noreturn]] void finish() {
        Fiber& me = fibers[cur];
        me.done = true;
        warps[cur >> 5].bar.leave();
        block.leave();
        if (--live == 0) {
            ctx_switch(me.ctx, launcher);
        } else {
            next();
        }
        fail("a finished fiber was resumed");
    }

    [[noreturn]] void deadlock() const {
        unsigned atBlock = 0, atWarp = 0;
        for (const Fiber& f : fibers) {
            if (!f.done) {
                ++(f.bar == &block ? atBlock : atWarp);
            }
        }
        char msg[300];
        std::snprintf(msg, sizeof msg,
                      "block (%u, %u, %u): deadlock: %u threads wait at __syncthreads and %u at a warp barrier "
                      "(__shfl_*_sync, __syncwarp, mma_16816), and none of them can complete (non-uniform control "
                      "flow)",
                      blockIdx.x, blockIdx.y, blockIdx.z, atBlock, atWarp);
        fail(msg);
    }

    // entry is where every fiber starts: the kernel, then retirement.
    [[noreturn]] static void entry();

    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Barrier block;
    Ctx launcher;
    const std::function<void()>* fn = nullptr;
    unsigned n = 0, cur = 0, live = 0;
    char* stacks = nullptr;
    size_t stride = 0, guard = 0;
    unsigned cap = 0;
};

// The scheduler of this object's launches (one at a time, see launch).
inline Sched* sched;

inline void Sched::entry() {
    (*sched->fn)();
    sched->finish();
}

inline void block_on(Barrier* b, unsigned long gen) { sched->wait(b, gen); }
} // namespace cudaemu

inline void cudaemu::launch(dim3 grid, dim3 block, const std::function<void()>& fn) {
    if (block.y != 1 || block.z != 1 || block.x == 0 || block.x % 32 != 0) {
        fail("blocks must be 1-D with a multiple of 32 threads");
    }
    // One launch at a time per object: the scheduler runs one block at a
    // time, and __shared__ statics would be shared by concurrent launches.
    // The scheduler and its stacks live as long as the process (nothing
    // runs at exit).
    static std::mutex* mu = new std::mutex;
    std::lock_guard<std::mutex> lk(*mu);
    if (sched == nullptr) {
        sched = new Sched;
    }
    blockDim = block;
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = uint3{x, y, z};
                sched->run(block.x, &fn);
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
// (fibers run on one OS thread, so every write before it is seen after
// it); like the shuffles it takes the full mask only, and a lane that
// returned instead of arriving is reported.
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

// Execution spaces and qualifiers: plain C++ on the CPU. Defined last, so
// that they cannot change the standard headers or the code above.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

#pragma GCC visibility pop
#endif

// ===========================================================================
// Tensor-core section: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
// The emitted prelude's mma_16816 calls cudaemu::mma_16816 under
// MINERVA_CUDA_EMU. It uses the running fiber's warp and lane and the
// warp's MmaArea (see there): one barrier per mma.
// ===========================================================================
#ifndef CUDAEMU_MMA_H
#define CUDAEMU_MMA_H
#pragma GCC visibility push(hidden)

namespace cudaemu {
// mma_warp is the exchange both emulated mmas share: every lane puts its
// fragments (a: four registers, b: two, c: four 32-bit values) into the
// warp's MmaArea, the first lane to run after the barrier computes the
// whole D once (compute, which reads m->a, m->b, m->c and writes m->d),
// and each lane copies its fragment of D back into c.
template <class T, class Compute>
inline void mma_warp(T* c, const uint32_t* a, const uint32_t* b, Compute compute) {
    static_assert(sizeof(T) == sizeof(float), "mma fragments are 32-bit");
    Warp* w = tl_warp;
    const unsigned lane = tl_lane;
    MmaArea* m = &w->mma;
    std::memcpy(m->a[lane], a, sizeof m->a[lane]);
    std::memcpy(m->b[lane], b, sizeof m->b[lane]);
    std::memcpy(m->c[lane], c, sizeof m->c[lane]);
    w->bar.wait(); // every lane's fragments are in
    if (m->ready != w->bar.generation) {
        compute(m);
        m->ready = w->bar.generation;
    }
    const unsigned g = lane >> 2, q = lane & 3;
    for (unsigned i = 0; i < 4; ++i) {
        std::memcpy(&c[i], &m->d[g + 8 * (i >> 1)][2 * q + (i & 1)], sizeof(T));
    }
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
// that (a few f32 ulps per mma against tolerances ≥ 1e-5). The first lane
// to run after the barrier computes the whole D once for the warp; the
// others copy their fragment of it.
inline void mma_16816(float* c, const uint32_t* a, const uint32_t* b) {
    mma_warp(c, a, b, [](MmaArea* m) {
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
        for (unsigned row = 0; row < 16; ++row) {
            for (unsigned col = 0; col < 8; ++col) {
                float d = C[row][col];
                for (unsigned k = 0; k < 16; ++k) {
                    d += A[row][k] * B[k][col];
                }
                m->d[row][col] = d;
            }
        }
    });
}

// mma_16832_s8 is D = A·B + C in integers for the warp: A 16×32 s8
// (row-major), B 32×8 s8 (K×N, each column contiguous in K), C and D 16×8
// s32, the layouts of the PTX ISA, section 9.7.14.5.9 ("Matrix Fragments for
// mma.m16n8k32"), for .s8 operands, g and q as above; in a register the
// lower-indexed element is in bits 0-7:
//   A: register r, byte h holds row g + 8·(r & 1), col 4q + h + 16·(r >> 1);
//   B: register r, byte h holds row (k) 4q + h + 16r, col (n) g;
//   C, D: as mma_16816's.
// Integer arithmetic is exact, as on the hardware. The f32 fields of the
// warp's MmaArea carry the s32 bits.
inline void mma_16832_s8(int* c, const uint32_t* a, const uint32_t* b) {
    mma_warp(c, a, b, [](MmaArea* m) {
        int A[16][32], B[32][8], C[16][8];
        for (unsigned l = 0; l < 32; ++l) {
            const unsigned g = l >> 2, q = l & 3;
            for (unsigned r = 0; r < 4; ++r) {
                for (unsigned h = 0; h < 4; ++h) {
                    A[g + 8 * (r & 1)][4 * q + h + 16 * (r >> 1)] = (signed char)(m->a[l][r] >> (8 * h));
                }
            }
            for (unsigned r = 0; r < 2; ++r) {
                for (unsigned h = 0; h < 4; ++h) {
                    B[4 * q + h + 16 * r][g] = (signed char)(m->b[l][r] >> (8 * h));
                }
            }
            for (unsigned i = 0; i < 4; ++i) {
                std::memcpy(&C[g + 8 * (i >> 1)][2 * q + (i & 1)], &m->c[l][i], sizeof(int));
            }
        }
        for (unsigned row = 0; row < 16; ++row) {
            for (unsigned col = 0; col < 8; ++col) {
                int d = C[row][col];
                for (unsigned k = 0; k < 32; ++k) {
                    d += A[row][k] * B[k][col];
                }
                std::memcpy(&m->d[row][col], &d, sizeof d);
            }
        }
    });
}
} // namespace cudaemu

#pragma GCC visibility pop
#endif
