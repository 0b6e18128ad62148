// emudriver.cc: a stand-in for libcuda.so.1 and libnvrtc that runs on the
// CPU, so that runtime/cuda (Go, purego, no cgo) can be tested end to end on
// machines without an NVIDIA GPU. One shared library exports the subset of
// the driver API and of NVRTC the backend calls, with the real C ABI (names,
// argument types, CUresult / nvrtcResult values of cuda.h and nvrtc.h); the
// tests point MINERVA_CUDA_LIB and MINERVA_NVRTC_LIB at it.
//
//   - "NVRTC" builds the CUDA C source as C++17 against cudaemu.h
//     (codegen/cuda/testdata: a block's CUDA threads run as fibers on the
//     calling thread, real barriers, warp shuffles) into a shared object in
//     a cache directory, with a generated trailer that registers every
//     extern "C" __global__ kernel: its parameter sizes, which are pointers,
//     and a launcher that unpacks a kernelParams array. The "PTX" it returns
//     names that object; cuModuleLoadData dlopens it.
//   - Device memory is host memory (a CUdeviceptr is the address). Every
//     allocation is its own mapping with a PROT_NONE page before it and one
//     right after its 256-byte-rounded end, so a kernel reading or writing
//     past a buffer faults; new memory is filled with 0xff bytes (NaN as f32
//     and f16), so a kernel or a runtime that relies on zeroed memory fails.
//   - cuLaunchKernel checks the launch shape and that every pointer argument
//     lies in a live allocation, copies the argument values (as CUDA does)
//     and runs the kernel to completion before returning. Every stream
//     operation runs at once, in order; kernels run one at a time.
//   - Stream capture records launches, async copies, memsets and event
//     records instead of running them; cuGraphLaunch replays them in order.
//     What a real capture rejects is rejected here too: synchronous copies,
//     memsets and synchronizations while a capture is open, work on the
//     legacy stream then, and async copies from pageable host memory (a
//     graph's copy node reads the host buffer at replay time, which CUDA
//     allows only for page-locked memory). The first such error invalidates
//     the capture, as in CUDA.
//   - A context is current per thread, as in CUDA: a call from a thread
//     where no live context is current fails with CUDA_ERROR_INVALID_CONTEXT
//     (a goroutine that moves to another OS thread would fail the same way
//     on a GPU).
//
// Environment: MINERVA_CUDAEMU_INCLUDE, the directory of cudaemu.h
// (required to compile); MINERVA_CUDAEMU_CACHE, where built objects are kept
// by the SHA-256 of what they are built from (default
// $TMPDIR/minerva-cudaemu); MINERVA_CUDAEMU_CXX, the compiler (default
// clang++). Build: clang++ -std=c++17 -O2 -fPIC -shared -pthread
// -fvisibility=hidden emudriver.cc -ldl (runtime/cuda/emudriver_test.go).
//
// Kernel errors abort the process (cudaemu.h's reports of non-uniform
// barriers), and out-of-bounds accesses fault on a guard page: the test
// binary dies loudly instead of passing.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdarg>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

extern char** environ;

// ---- the driver API's types and codes (cuda.h) ----

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUctx_st* CUcontext;
typedef CUmod_st* CUmodule;
typedef CUfunc_st* CUfunction;
typedef CUstream_st* CUstream;
typedef CUevent_st* CUevent;
typedef CUgraph_st* CUgraph;
typedef CUgraphExec_st* CUgraphExec;

enum : CUresult {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_UNKNOWN = 999,
};

// The handles of the legacy default stream (0 and CU_STREAM_LEGACY) and of
// the per-thread default stream (CU_STREAM_PER_THREAD).
static const uintptr_t kStreamLegacy = 1, kStreamPerThread = 2;
static const unsigned kStreamNonBlocking = 1; // CU_STREAM_NON_BLOCKING
static const unsigned kEventDisableTiming = 2; // CU_EVENT_DISABLE_TIMING

// The emulated device.
static const int kDriverVersion = 12040;
static const size_t kTotalMem = size_t(8) << 30;
static const char kDeviceName[] = "Minerva CUDA emulator (CPU)";

// ---- the module ABI shared with the generated trailer ----

// EmuKernel is one kernel of a module, as the trailer registers it: the
// parameter list deduced from the function's type, and a launcher that runs
// fn through cudaemu::launch with the values params[i] point at.
struct EmuKernel {
    const char* name;
    unsigned nparams;
    const unsigned* sizes;      // nparams entries
    const unsigned char* isptr; // nparams entries: 1 for a pointer
    void (*fn)();
    void (*launch)(void (*fn)(), const unsigned* grid, const unsigned* block, void** params);
};
typedef const EmuKernel* (*ModuleEntry)(unsigned* n);
static const char kModuleEntry[] = "minerva_cudaemu_module_v1";
static const char kImageMagic[] = "// minerva-cudaemu module v1\n";

// ---- state (every entry point holds mu for its whole call) ----

struct Alloc {
    uintptr_t base;
    size_t size;
    void* map;
    size_t maplen;
    bool host; // cuMemAllocHost (page-locked host memory)
};

struct CUctx_st {
    int unused;
};
struct CUmod_st {
    void* dl;
    std::string path;
    std::map<std::string, CUfunc_st*> funcs;
};
struct CUfunc_st {
    const EmuKernel* k;
};

// Op is one stream operation: run at once, or recorded by a capture.
struct Op {
    enum Kind { Kernel, Copy, Memset, Record } kind;
    // Kernel: the function, its shape and the argument values copied at
    // launch (each at off[i] in args, 16-byte aligned).
    CUfunc_st* f = nullptr;
    unsigned grid[3] = {}, block[3] = {};
    std::vector<unsigned char> args;
    std::vector<size_t> off;
    // Copy and Memset: the ranges; which side is device memory.
    uintptr_t dst = 0, src = 0;
    size_t n = 0;
    bool dstDevice = false, srcDevice = false;
    unsigned char value = 0;
    // Record.
    CUevent_st* ev = nullptr;
};

struct Capture {
    int mode = 0; // CUstreamCaptureMode
    bool invalid = false;
    std::vector<Op> ops;
};
struct CUstream_st {
    unsigned flags = 0;
    Capture* cap = nullptr;
};
struct CUevent_st {
    unsigned flags = 0;
    bool recorded = false;
    std::chrono::steady_clock::time_point t;
};
struct CUgraph_st {
    std::vector<Op> ops;
};
struct CUgraphExec_st {
    std::vector<Op> ops;
};

static std::mutex mu;
static bool inited;
static std::map<uintptr_t, Alloc> allocs; // by base
static size_t deviceBytes;                // live device allocations, for cuMemGetInfo
// Handles is the set of live handles with their types: a dangling handle,
// or one of another type than the call takes, is an invalid handle, never a
// cast.
struct Handles {
    std::map<const void*, const std::type_info*> m;
    template <class T>
    void insert(T* p) {
        m[p] = &typeid(T);
    }
    template <class T>
    void erase(T* p) {
        m.erase(p);
    }
    template <class T>
    bool count(T* p) const {
        auto it = m.find(p);
        return it != m.end() && *it->second == typeid(T);
    }
};
static Handles live;                      // every live handle
static std::set<CUstream_st*> streams;    // the created streams (also in live)
static CUstream_st perThread;             // CU_STREAM_PER_THREAD
static thread_local CUctx_st* current;

static void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("minerva-cudaemu: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
}

// ready is the check of calls that need cuInit and a current context.
static CUresult ready() {
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (current == nullptr || !live.count(current)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return CUDA_SUCCESS;
}

// find returns the live allocation containing [p, p+n) (n = 0: p alone), or
// nullptr.
static const Alloc* find(uintptr_t p, size_t n) {
    auto it = allocs.upper_bound(p);
    if (it == allocs.begin()) {
        return nullptr;
    }
    --it;
    const Alloc& a = it->second;
    if (p < a.base || p - a.base >= a.size || (n > 0 && n > a.size - (p - a.base))) {
        return nullptr;
    }
    return &a;
}

static bool deviceRange(uintptr_t p, size_t n) {
    const Alloc* a = find(p, n);
    return a != nullptr && !a->host;
}

static bool pinnedRange(uintptr_t p, size_t n) {
    const Alloc* a = find(p, n);
    return a != nullptr && a->host;
}

// allocate maps size bytes (rounded up to 256) between two PROT_NONE pages,
// ending right at the second one.
static CUresult allocate(size_t size, bool host, uintptr_t* out) {
    if (size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!host && (size > kTotalMem || deviceBytes > kTotalMem - size)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t rounded = (size + 255) / 256 * 256;
    const size_t pages = (rounded + page - 1) / page * page;
    const size_t maplen = page + pages + page;
    void* m = mmap(nullptr, maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    char* body = static_cast<char*>(m) + page;
    if (mprotect(body, pages, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, maplen);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const uintptr_t base = uintptr_t(body + pages - rounded);
    std::memset(reinterpret_cast<void*>(base), 0xff, rounded);
    allocs[base] = Alloc{base, size, m, maplen, host};
    if (!host) {
        deviceBytes += size;
    }
    *out = base;
    return CUDA_SUCCESS;
}

static CUresult release(uintptr_t p, bool host) {
    auto it = allocs.find(p);
    if (it == allocs.end() || it->second.host != host) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!host) {
        deviceBytes -= it->second.size;
    }
    munmap(it->second.map, it->second.maplen);
    allocs.erase(it);
    return CUDA_SUCCESS;
}

// checkArgs reports and rejects a pointer argument outside every live
// allocation (device memory, or page-locked host memory, which a GPU with
// unified addressing reaches too).
static CUresult checkArgs(const Op& op, const char* call) {
    const EmuKernel* k = op.f->k;
    for (unsigned i = 0; i < k->nparams; ++i) {
        if (!k->isptr[i] || k->sizes[i] != sizeof(uintptr_t)) {
            continue;
        }
        uintptr_t p;
        std::memcpy(&p, &op.args[op.off[i]], sizeof p);
        if (p != 0 && find(p, 0) == nullptr) {
            report("%s: kernel %s: parameter %u = %#llx is not inside a live allocation", call, k->name, i,
                   (unsigned long long)p);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

// checkRanges rejects a copy or memset whose device side is not inside one
// live device allocation (at issue and again at graph replay: the memory
// may have been freed since).
static CUresult checkRanges(const Op& op, const char* call) {
    if (op.n == 0) {
        return CUDA_SUCCESS;
    }
    if (op.dstDevice && !deviceRange(op.dst, op.n)) {
        report("%s: destination [%#llx, +%zu) is not inside a live device allocation", call,
               (unsigned long long)op.dst, op.n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (op.kind == Op::Copy && op.srcDevice && !deviceRange(op.src, op.n)) {
        report("%s: source [%#llx, +%zu) is not inside a live device allocation", call, (unsigned long long)op.src,
               op.n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

// run executes one operation now.
static CUresult run(const Op& op, const char* call) {
    switch (op.kind) {
    case Op::Kernel: {
        if (!live.count(op.f)) {
            return CUDA_ERROR_INVALID_HANDLE;
        }
        if (CUresult r = checkArgs(op, call)) {
            return r;
        }
        std::vector<void*> params(op.off.size() + 1);
        for (size_t i = 0; i < op.off.size(); ++i) {
            params[i] = const_cast<unsigned char*>(&op.args[op.off[i]]);
        }
        op.f->k->launch(op.f->k->fn, op.grid, op.block, params.data());
        return CUDA_SUCCESS;
    }
    case Op::Copy:
        if (CUresult r = checkRanges(op, call)) {
            return r;
        }
        if (op.n > 0) {
            std::memmove(reinterpret_cast<void*>(op.dst), reinterpret_cast<const void*>(op.src), op.n);
        }
        return CUDA_SUCCESS;
    case Op::Memset:
        if (CUresult r = checkRanges(op, call)) {
            return r;
        }
        if (op.n > 0) {
            std::memset(reinterpret_cast<void*>(op.dst), op.value, op.n);
        }
        return CUDA_SUCCESS;
    case Op::Record:
        if (!live.count(op.ev)) {
            return CUDA_ERROR_INVALID_HANDLE;
        }
        op.ev->recorded = true;
        op.ev->t = std::chrono::steady_clock::now();
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_UNKNOWN;
}

// stream resolves a handle: legacy is set for the legacy default stream,
// which has no object.
static CUresult stream(CUstream h, CUstream_st** s, bool* legacy) {
    const uintptr_t v = uintptr_t(h);
    *s = nullptr;
    *legacy = false;
    if (v == 0 || v == kStreamLegacy) {
        *legacy = true;
        return CUDA_SUCCESS;
    }
    if (v == kStreamPerThread) {
        *s = &perThread;
        return CUDA_SUCCESS;
    }
    if (!live.count(h)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *s = h;
    return CUDA_SUCCESS;
}

// ---- stream capture ----

enum { kCaptureGlobal = 0, kCaptureThreadLocal = 1, kCaptureRelaxed = 2 };

// each calls fn on every stream object (the per-thread default stream and
// the created ones).
template <class F>
static void each(F fn) {
    fn(&perThread);
    for (CUstream_st* s : streams) {
        fn(s);
    }
}

// prohibited fails a call CUDA forbids while a capture in global or
// thread-local mode is open (synchronous copies and memsets, allocation,
// synchronization), invalidating the open captures as CUDA does.
static CUresult prohibited(const char* call) {
    bool open = false;
    each([&](CUstream_st* s) { open = open || (s->cap != nullptr && s->cap->mode != kCaptureRelaxed); });
    if (!open) {
        return CUDA_SUCCESS;
    }
    report("%s while a stream capture is open: not allowed (the capture is invalidated)", call);
    each([&](CUstream_st* s) {
        if (s->cap != nullptr) {
            s->cap->invalid = true;
        }
    });
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// hostPinned reports whether the host side of a copy is page-locked memory.
static bool hostPinned(const Op& op) {
    if (op.kind != Op::Copy || op.n == 0) {
        return true;
    }
    if (!op.srcDevice && !pinnedRange(op.src, op.n)) {
        return false;
    }
    return op.dstDevice || pinnedRange(op.dst, op.n);
}

// validate checks op's device ranges or pointer arguments.
static CUresult validate(const Op& op, const char* call) {
    switch (op.kind) {
    case Op::Kernel:
        return checkArgs(op, call);
    case Op::Copy:
    case Op::Memset:
        return checkRanges(op, call);
    case Op::Record:
        return live.count(op.ev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    }
    return CUDA_ERROR_UNKNOWN;
}

// submit issues op on stream h: recorded when h is capturing, else run now.
static CUresult submit(CUstream h, Op op, const char* call) {
    CUstream_st* s;
    bool legacy;
    if (CUresult r = stream(h, &s, &legacy)) {
        return r;
    }
    if (s != nullptr && s->cap != nullptr) {
        if (s->cap->invalid) {
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        if (CUresult r = validate(op, call)) {
            s->cap->invalid = true;
            return r;
        }
        if (!hostPinned(op)) {
            report("%s: an async copy from or to pageable host memory cannot be captured (use cuMemAllocHost "
                   "memory; the capture is invalidated)",
                   call);
            s->cap->invalid = true;
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        s->cap->ops.push_back(std::move(op));
        return CUDA_SUCCESS;
    }
    if (legacy) {
        // The legacy stream waits for every blocking stream: work on it
        // while such a stream captures would depend on the capture.
        bool implicit = false;
        each([&](CUstream_st* c) {
            if (c->cap != nullptr && !(c->flags & kStreamNonBlocking)) {
                c->cap->invalid = true;
                implicit = true;
            }
        });
        if (implicit) {
            report("%s on the legacy stream while a blocking stream captures (the capture is invalidated)", call);
            return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    return run(op, call);
}

static Op copyOp(uintptr_t dst, bool dstDevice, uintptr_t src, bool srcDevice, size_t n) {
    Op op;
    op.kind = Op::Copy;
    op.dst = dst;
    op.dstDevice = dstDevice;
    op.src = src;
    op.srcDevice = srcDevice;
    op.n = n;
    return op;
}

static Op memsetOp(uintptr_t dst, unsigned char v, size_t n) {
    Op op;
    op.kind = Op::Memset;
    op.dst = dst;
    op.dstDevice = true;
    op.value = v;
    op.n = n;
    return op;
}

// syncCopy is a synchronous cuMemcpy*/cuMemset*: prohibited during a
// capture, else run at once.
static CUresult syncOp(const Op& op, const char* call) {
    if (CUresult r = ready()) {
        return r;
    }
    if (op.n > 0 && ((op.kind == Op::Copy && (op.src == 0 || op.dst == 0)) || op.dst == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (CUresult r = prohibited(call)) {
        return r;
    }
    return run(op, call);
}

static CUresult asyncOp(Op op, CUstream h, const char* call) {
    if (CUresult r = ready()) {
        return r;
    }
    if (op.n > 0 && ((op.kind == Op::Copy && (op.src == 0 || op.dst == 0)) || op.dst == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return submit(h, std::move(op), call);
}

typedef std::lock_guard<std::mutex> Lock;

// ---- initialization, device, context ----

EXPORT CUresult cuInit(unsigned flags) {
    Lock lk(mu);
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    inited = true;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int* v) {
    if (v == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *v = kDriverVersion;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int* n) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (n == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *n = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ordinal != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = 0;
    return CUDA_SUCCESS;
}

static std::string env(const char* name, const std::string& def);

EXPORT CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice dev) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (v == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    // CUdevice_attribute values: an sm_80 with two multiprocessors. The
    // launch checks below accept less than these limits (1-D blocks of a
    // multiple of 32 threads, no dynamic shared memory).
    static const std::map<int, int> attrs = {
        {1, 1024},       // MAX_THREADS_PER_BLOCK
        {2, 1024},       // MAX_BLOCK_DIM_X
        {3, 1024},       // MAX_BLOCK_DIM_Y
        {4, 64},         // MAX_BLOCK_DIM_Z
        {5, 2147483647}, // MAX_GRID_DIM_X
        {6, 65535},      // MAX_GRID_DIM_Y
        {7, 65535},      // MAX_GRID_DIM_Z
        {8, 49152},      // MAX_SHARED_MEMORY_PER_BLOCK
        {10, 32},        // WARP_SIZE
        {16, 2},         // MULTIPROCESSOR_COUNT
        {75, 8},         // COMPUTE_CAPABILITY_MAJOR
        {76, 0},         // COMPUTE_CAPABILITY_MINOR
    };
    // MINERVA_CUDAEMU_SM90=1 reports compute capability 9.0, where the
    // runtime launches through cuLaunchKernelEx.
    if (attr == 75 && env("MINERVA_CUDAEMU_SM90", "") == "1") {
        *v = 9;
        return CUDA_SUCCESS;
    }
    auto it = attrs.find(attr);
    if (it == attrs.end()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *v = it->second;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (name == nullptr || len <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    std::snprintf(name, size_t(len), "%s", kDeviceName);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (bytes == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *bytes = kTotalMem;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned flags, CUdevice dev) {
    Lock lk(mu);
    (void)flags;
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ctx == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    CUctx_st* c = new CUctx_st{};
    live.insert(c);
    current = c; // a new context is current to the creating thread
    *ctx = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ctx == nullptr || !live.count(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    live.erase(ctx);
    if (current == ctx) {
        current = nullptr;
    }
    delete ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    Lock lk(mu);
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (ctx != nullptr && !live.count(ctx)) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    current = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize() {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    return prohibited("cuCtxSynchronize");
}

EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (free == nullptr || total == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *free = kTotalMem - deviceBytes;
    *total = kTotalMem;
    return CUDA_SUCCESS;
}

// ---- memory ----

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (p == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (CUresult r = prohibited("cuMemAlloc_v2")) {
        return r;
    }
    uintptr_t a;
    if (CUresult r = allocate(bytes, false, &a)) {
        return r;
    }
    *p = a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (CUresult r = prohibited("cuMemFree_v2")) {
        return r;
    }
    if (CUresult r = release(uintptr_t(p), false)) {
        report("cuMemFree_v2: %#llx is not a live device allocation", p);
        return r;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (p == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (CUresult r = prohibited("cuMemAllocHost_v2")) {
        return r;
    }
    uintptr_t a;
    if (CUresult r = allocate(bytes, true, &a)) {
        return r;
    }
    *p = reinterpret_cast<void*>(a);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void* p) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (CUresult r = prohibited("cuMemFreeHost")) {
        return r;
    }
    if (CUresult r = release(uintptr_t(p), true)) {
        report("cuMemFreeHost: %p is not a live cuMemAllocHost allocation", p);
        return r;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    Lock lk(mu);
    return syncOp(copyOp(dst, true, uintptr_t(src), false, n), "cuMemcpyHtoD_v2");
}

EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    Lock lk(mu);
    return syncOp(copyOp(uintptr_t(dst), false, src, true, n), "cuMemcpyDtoH_v2");
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    Lock lk(mu);
    return syncOp(copyOp(dst, true, src, true, n), "cuMemcpyDtoD_v2");
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
    Lock lk(mu);
    return asyncOp(copyOp(dst, true, uintptr_t(src), false, n), h, "cuMemcpyHtoDAsync_v2");
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
    Lock lk(mu);
    return asyncOp(copyOp(uintptr_t(dst), false, src, true, n), h, "cuMemcpyDtoHAsync_v2");
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    Lock lk(mu);
    return asyncOp(copyOp(dst, true, src, true, n), h, "cuMemcpyDtoDAsync_v2");
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    Lock lk(mu);
    return syncOp(memsetOp(dst, v, n), "cuMemsetD8_v2");
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
    Lock lk(mu);
    return asyncOp(memsetOp(dst, v, n), h, "cuMemsetD8Async");
}

// ---- modules and launches ----

EXPORT CUresult cuModuleLoadData(CUmodule* m, const void* image) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (m == nullptr || image == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const char* img = static_cast<const char*>(image);
    const size_t magic = sizeof kImageMagic - 1;
    if (std::strncmp(img, kImageMagic, magic) != 0) {
        report("cuModuleLoadData: the image is not one of this emulator's NVRTC outputs (real PTX or cubin?)");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    const char* path = img + magic;
    const char* nl = std::strchr(path, '\n');
    std::string so(path, nl != nullptr ? size_t(nl - path) : std::strlen(path));
    void* dl = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) {
        report("cuModuleLoadData: %s (a stale image whose object was removed from the emulation cache?)", dlerror());
        return CUDA_ERROR_INVALID_IMAGE;
    }
    auto entry = reinterpret_cast<ModuleEntry>(dlsym(dl, kModuleEntry));
    if (entry == nullptr) {
        report("cuModuleLoadData: %s has no %s", so.c_str(), kModuleEntry);
        dlclose(dl);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmod_st* mod = new CUmod_st{dl, so, {}};
    unsigned n = 0;
    const EmuKernel* ks = entry(&n);
    for (unsigned i = 0; i < n; ++i) {
        CUfunc_st* f = new CUfunc_st{&ks[i]};
        mod->funcs[ks[i].name] = f;
        live.insert(f);
    }
    live.insert(mod);
    *m = mod;
    return CUDA_SUCCESS;
}

// cuModuleUnload invalidates the module's handles but never dlcloses the
// object: cudaemu keeps its scheduler and fiber stacks, mapped once per
// object, for the process's life.
EXPORT CUresult cuModuleUnload(CUmodule m) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(m)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (auto& kv : m->funcs) {
        live.erase(kv.second);
    }
    live.erase(m);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (f == nullptr || name == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!live.count(m)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    auto it = m->funcs.find(name);
    if (it == m->funcs.end()) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *f = it->second;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned sharedMemBytes, CUstream h, void** params, void** extra) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(f)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const EmuKernel* k = f->k;
    if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535 || gz > 65535) {
        report("cuLaunchKernel: kernel %s: grid (%u, %u, %u) out of range", k->name, gx, gy, gz);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (bx == 0 || bx % 32 != 0 || bx > 1024 || by != 1 || bz != 1) {
        report("cuLaunchKernel: kernel %s: block (%u, %u, %u): the emulation runs 1-D blocks of 32 to 1024 threads, a "
               "multiple of 32",
               k->name, bx, by, bz);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (sharedMemBytes != 0) {
        report("cuLaunchKernel: kernel %s: %u bytes of dynamic shared memory (the emitted kernels use static shared "
               "memory only)",
               k->name, sharedMemBytes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (extra != nullptr) {
        report("cuLaunchKernel: kernel %s: the extra argument is not supported (pass kernelParams)", k->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params == nullptr && k->nparams > 0) {
        report("cuLaunchKernel: kernel %s: kernelParams is null", k->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    Op op;
    op.kind = Op::Kernel;
    op.f = f;
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    std::memcpy(op.grid, g, sizeof g);
    std::memcpy(op.block, b, sizeof b);
    // The values are copied now, as CUDA does: the caller may reuse its
    // parameter block as soon as the call returns, and a captured launch
    // replays the values of the capture.
    size_t at = 0;
    for (unsigned i = 0; i < k->nparams; ++i) {
        if (params[i] == nullptr) {
            report("cuLaunchKernel: kernel %s: kernelParams[%u] is null", k->name, i);
            return CUDA_ERROR_INVALID_VALUE;
        }
        at = (at + 15) / 16 * 16;
        op.off.push_back(at);
        at += k->sizes[i];
    }
    op.args.resize(at);
    for (unsigned i = 0; i < k->nparams; ++i) {
        std::memcpy(&op.args[op.off[i]], params[i], k->sizes[i]);
    }
    if (CUresult r = checkArgs(op, "cuLaunchKernel")) {
        return r;
    }
    return submit(h, std::move(op), "cuLaunchKernel");
}

// cuLaunchKernelEx (CUDA 12.0) reads the launch from a CUlaunchConfig. The
// runtime calls it only to allow programmatic stream serialization, so the
// emulation accepts exactly that one attribute, set (CUDA would take none,
// or others): the kernels run one at a time here, so the overlap it allows
// is moot, and the kernels' griddepcontrol waits compile to nothing. The
// struct is read at cuda.h's offsets, so a caller that lays it out wrongly
// fails the launch checks or this one.
struct EmuLaunchAttribute {
    uint32_t id;
    uint32_t pad;
    int32_t value[16];
};
struct EmuLaunchConfig {
    unsigned gx, gy, gz, bx, by, bz, sharedMemBytes;
    CUstream h;
    EmuLaunchAttribute* attrs;
    unsigned numAttrs;
};
static_assert(sizeof(EmuLaunchConfig) == 56 && offsetof(EmuLaunchConfig, h) == 32 &&
                  offsetof(EmuLaunchConfig, attrs) == 40 && offsetof(EmuLaunchConfig, numAttrs) == 48,
              "CUlaunchConfig layout");
static_assert(sizeof(EmuLaunchAttribute) == 72, "CUlaunchAttribute layout");

EXPORT CUresult cuLaunchKernelEx(const EmuLaunchConfig* c, CUfunction f, void** params, void** extra) {
    if (c == nullptr || c->numAttrs != 1 || c->attrs == nullptr) {
        report("cuLaunchKernelEx: want a config with one attribute (programmatic stream serialization)");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->attrs[0].id != 6 || c->attrs[0].value[0] != 1) {
        report("cuLaunchKernelEx: attribute id %u value %d, want programmatic stream serialization (6) allowed (1)",
               c->attrs[0].id, c->attrs[0].value[0]);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->sharedMemBytes, c->h, params, extra);
}

// ---- streams, graphs, events ----

EXPORT CUresult cuStreamCreate(CUstream* h, unsigned flags) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (h == nullptr || (flags & ~kStreamNonBlocking) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstream_st* s = new CUstream_st{};
    s->flags = flags;
    live.insert(s);
    streams.insert(s);
    *h = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!streams.count(h)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    streams.erase(h);
    live.erase(h);
    delete h->cap;
    delete h;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream h) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    CUstream_st* s;
    bool legacy;
    if (CUresult r = stream(h, &s, &legacy)) {
        return r;
    }
    return prohibited("cuStreamSynchronize");
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, int mode) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (mode < kCaptureGlobal || mode > kCaptureRelaxed) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstream_st* s;
    bool legacy;
    if (CUresult r = stream(h, &s, &legacy)) {
        return r;
    }
    if (legacy) {
        report("cuStreamBeginCapture_v2: the legacy default stream cannot be captured");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->cap != nullptr) {
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    s->cap = new Capture{};
    s->cap->mode = mode;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph* g) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (g == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstream_st* s;
    bool legacy;
    if (CUresult r = stream(h, &s, &legacy)) {
        return r;
    }
    if (legacy || s->cap == nullptr) {
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    Capture* c = s->cap;
    s->cap = nullptr;
    *g = nullptr;
    if (c->invalid) {
        delete c;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    CUgraph_st* graph = new CUgraph_st{std::move(c->ops)};
    delete c;
    live.insert(graph);
    *g = graph;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long flags) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (e == nullptr || (flags & ~0xfull) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!live.count(g)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUgraphExec_st* x = new CUgraphExec_st{g->ops};
    live.insert(x);
    *e = x;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream h) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(e)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    // Every node is checked before any runs: a replay touching freed
    // memory is refused whole, not run halfway.
    for (const Op& op : e->ops) {
        if (CUresult r = validate(op, "cuGraphLaunch")) {
            return r;
        }
    }
    for (const Op& op : e->ops) {
        if (CUresult r = submit(h, op, "cuGraphLaunch")) {
            return r;
        }
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(e)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    live.erase(e);
    delete e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(g)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    live.erase(g);
    delete g;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent* ev, unsigned flags) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (ev == nullptr || (flags & ~7u) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUevent_st* x = new CUevent_st{};
    x->flags = flags;
    live.insert(x);
    *ev = x;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent ev, CUstream h) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(ev)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    Op op;
    op.kind = Op::Record;
    op.ev = ev;
    return submit(h, std::move(op), "cuEventRecord");
}

EXPORT CUresult cuEventSynchronize(CUevent ev) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    return live.count(ev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (ms == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!live.count(a) || !live.count(b) || !a->recorded || !b->recorded || (a->flags & kEventDisableTiming) ||
        (b->flags & kEventDisableTiming)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent ev) {
    Lock lk(mu);
    if (CUresult r = ready()) {
        return r;
    }
    if (!live.count(ev)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    live.erase(ev);
    delete ev;
    return CUDA_SUCCESS;
}

// ---- error names ----

struct ErrorText {
    CUresult code;
    const char *name, *text;
};
static const ErrorText errorTexts[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const ErrorText* errorText(CUresult r) {
    for (const ErrorText& e : errorTexts) {
        if (e.code == r) {
            return &e;
        }
    }
    return nullptr;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char** s) {
    if (s == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const ErrorText* e = errorText(r);
    *s = e != nullptr ? e->name : nullptr;
    return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char** s) {
    if (s == nullptr) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const ErrorText* e = errorText(r);
    *s = e != nullptr ? e->text : nullptr;
    return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- NVRTC ----

typedef int nvrtcResult;
enum : nvrtcResult {
    NVRTC_SUCCESS = 0,
    NVRTC_ERROR_OUT_OF_MEMORY = 1,
    NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
    NVRTC_ERROR_INVALID_INPUT = 3,
    NVRTC_ERROR_INVALID_PROGRAM = 4,
    NVRTC_ERROR_INVALID_OPTION = 5,
    NVRTC_ERROR_COMPILATION = 6,
    NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
    NVRTC_ERROR_INTERNAL_ERROR = 11,
};

struct _nvrtcProgram {
    std::string source, name, log, image;
    bool compiled = false;
};
typedef _nvrtcProgram* nvrtcProgram;

static std::mutex nvmu;
static std::set<nvrtcProgram> programs;

// sha256 is the hex SHA-256 of s (FIPS 180-4), the cache key.
static std::string sha256(const std::string& s) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    };
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::string m = s;
    const uint64_t bits = uint64_t(s.size()) * 8;
    m.push_back(char(0x80));
    while (m.size() % 64 != 56) {
        m.push_back(0);
    }
    for (int i = 7; i >= 0; --i) {
        m.push_back(char(bits >> (8 * i)));
    }
    auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
    for (size_t at = 0; at < m.size(); at += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; ++i) {
            const unsigned char* p = reinterpret_cast<const unsigned char*>(&m[at + 4 * size_t(i)]);
            w[i] = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
        }
        for (int i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        const uint32_t add[8] = {a, b, c, d, e, f, g, hh};
        for (int i = 0; i < 8; ++i) {
            h[i] += add[i];
        }
    }
    std::string out;
    char buf[9];
    for (uint32_t x : h) {
        std::snprintf(buf, sizeof buf, "%08x", x);
        out += buf;
    }
    return out;
}

// stripComments blanks // and /* */ comments (string and character
// literals kept), so that a kernel mentioned in a comment is not
// registered.
static std::string stripComments(const std::string& s) {
    std::string o = s;
    for (size_t i = 0; i < o.size();) {
        if (o[i] == '"' || o[i] == '\'') {
            const char q = o[i++];
            while (i < o.size() && o[i] != q) {
                i += o[i] == '\\' ? 2 : 1;
            }
            ++i;
        } else if (o.compare(i, 2, "//") == 0) {
            while (i < o.size() && o[i] != '\n') {
                o[i++] = ' ';
            }
        } else if (o.compare(i, 2, "/*") == 0) {
            const size_t end = o.find("*/", i + 2);
            const size_t stop = end == std::string::npos ? o.size() : end + 2;
            for (; i < stop; ++i) {
                if (o[i] != '\n') {
                    o[i] = ' ';
                }
            }
        } else {
            ++i;
        }
    }
    return o;
}

static bool isIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// kernelNames finds every `extern "C" __global__ void NAME(`, with an
// optional __launch_bounds__(...) before NAME.
static std::vector<std::string> kernelNames(const std::string& src) {
    const std::string s = stripComments(src);
    std::vector<std::string> out;
    size_t i = 0;
    auto ws = [&] {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
            ++i;
        }
    };
    auto word = [&](const char* w) {
        const size_t n = std::strlen(w);
        if (s.compare(i, n, w) != 0 || (i + n < s.size() && isIdent(s[i + n]) && isIdent(w[n - 1]))) {
            return false;
        }
        i += n;
        return true;
    };
    for (size_t at = s.find("extern"); at != std::string::npos; at = s.find("extern", at + 1)) {
        if (at > 0 && isIdent(s[at - 1])) {
            continue;
        }
        i = at + 6;
        ws();
        if (!word("\"C\"")) {
            continue;
        }
        ws();
        if (!word("__global__")) {
            continue;
        }
        ws();
        if (!word("void")) {
            continue;
        }
        ws();
        if (word("__launch_bounds__")) {
            ws();
            if (i >= s.size() || s[i] != '(') {
                continue;
            }
            int depth = 0;
            for (; i < s.size(); ++i) {
                depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
                if (depth == 0) {
                    ++i;
                    break;
                }
            }
            ws();
        }
        const size_t start = i;
        while (i < s.size() && isIdent(s[i])) {
            ++i;
        }
        std::string name = s.substr(start, i - start);
        ws();
        if (!name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) && i < s.size() && s[i] == '(') {
            out.push_back(name);
        }
    }
    return out;
}

// trailer registers the kernels: the parameter list comes from the
// function's type, so it always matches the definition.
static std::string trailer(const std::vector<std::string>& names) {
    std::string t = R"(
#line 1 "minerva-cudaemu-trailer"
#include <cstddef>
#include <type_traits>
#include <utility>
namespace minerva_cudaemu {
struct Kernel {
    const char* name;
    unsigned nparams;
    const unsigned* sizes;
    const unsigned char* isptr;
    void (*fn)();
    void (*launch)(void (*fn)(), const unsigned* grid, const unsigned* block, void** params);
};
template <class... A, std::size_t... I>
inline void call(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<A*>(p[I])...);
}
template <class... A>
void launch(void (*fp)(), const unsigned* g, const unsigned* b, void** p) {
    auto f = reinterpret_cast<void (*)(A...)>(fp);
    cudaemu::launch(dim3{g[0], g[1], g[2]}, dim3{b[0], b[1], b[2]}, [f, p] { call(f, p, std::index_sequence_for<A...>{}); });
}
template <class... A>
struct Sig {
    static_assert((std::is_trivially_copyable<A>::value && ...), "a kernel parameter that is not trivially copyable");
    static constexpr unsigned sizes[] = {unsigned(sizeof(A))..., 0u};
    static constexpr unsigned char isptr[] = {(unsigned char)(std::is_pointer<A>::value)..., 0};
};
template <class... A>
constexpr Kernel kernel(const char* name, void (*f)(A...)) {
    return Kernel{name, unsigned(sizeof...(A)), Sig<A...>::sizes, Sig<A...>::isptr, reinterpret_cast<void (*)()>(f), &launch<A...>};
}
} // namespace minerva_cudaemu
extern "C" __attribute__((visibility("default"))) const minerva_cudaemu::Kernel* minerva_cudaemu_module_v1(unsigned* n) {
    static const minerva_cudaemu::Kernel k[] = {
)";
    for (const std::string& n : names) {
        t += "        minerva_cudaemu::kernel(\"" + n + "\", &::" + n + "),\n";
    }
    t += "        {},\n    };\n    *n = " + std::to_string(names.size()) + ";\n    return k;\n}\n";
    return t;
}

static bool readFile(const std::string& path, std::string* out) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        return false;
    }
    char buf[65536];
    size_t n;
    out->clear();
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        out->append(buf, n);
    }
    std::fclose(f);
    return true;
}

static bool writeFile(const std::string& path, const std::string& data) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        return false;
    }
    const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    return std::fclose(f) == 0 && ok;
}

static bool mkdirs(const std::string& dir) {
    for (size_t i = 1; i <= dir.size(); ++i) {
        if (i == dir.size() || dir[i] == '/') {
            const std::string d = dir.substr(0, i);
            if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
                return false;
            }
        }
    }
    return true;
}

// option checks one NVRTC option: what the backend passes, and nothing that
// would change the emulated build unnoticed.
static bool option(const std::string& o) {
    for (const char* p : {"--gpu-architecture=", "-arch="}) {
        const size_t n = std::strlen(p);
        if (o.compare(0, n, p) == 0) {
            const std::string a = o.substr(n);
            const size_t d = a.rfind('_');
            return (a.compare(0, 8, "compute_") == 0 || a.compare(0, 3, "sm_") == 0) && d + 1 < a.size() &&
                   a.find_first_not_of("0123456789", d + 1) == std::string::npos;
        }
    }
    for (const char* ok : {"--std=c++17", "-std=c++17", "-default-device", "--device-as-default-execution-space",
                           "--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info"}) {
        if (o == ok) {
            return true;
        }
    }
    return false;
}

// build runs the C++ compiler: argv[0] found on PATH, its standard output
// and error into log.
static bool build(const std::vector<std::string>& args, const std::string& logPath, std::string* log) {
    std::vector<char*> argv;
    for (const std::string& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
        *log = "minerva-cudaemu: cannot run " + args[0] + ": " + std::strerror(err) +
               " (set MINERVA_CUDAEMU_CXX to a C++17 compiler)\n";
        return false;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    readFile(logPath, log);
    unlink(logPath.c_str());
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static std::string env(const char* name, const std::string& def) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != 0 ? std::string(v) : def;
}

// compile builds p into the cache, or finds it there.
static nvrtcResult compile(nvrtcProgram p) {
    const std::string inc = env("MINERVA_CUDAEMU_INCLUDE", "");
    if (inc.empty()) {
        p->log = "minerva-cudaemu: MINERVA_CUDAEMU_INCLUDE is not set (the directory of cudaemu.h, "
                 "codegen/cuda/testdata)\n";
        return NVRTC_ERROR_COMPILATION;
    }
    const std::string header = inc + "/cudaemu.h";
    std::string emu;
    if (!readFile(header, &emu)) {
        p->log = "minerva-cudaemu: cannot read " + header + " (MINERVA_CUDAEMU_INCLUDE)\n";
        return NVRTC_ERROR_COMPILATION;
    }
    const std::string dir = env("MINERVA_CUDAEMU_CACHE", env("TMPDIR", "/tmp") + "/minerva-cudaemu");
    if (!mkdirs(dir)) {
        p->log = "minerva-cudaemu: cannot create the cache directory " + dir + ": " + std::strerror(errno) + "\n";
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    const std::string cxx = env("MINERVA_CUDAEMU_CXX", "clang++");
    std::string name = p->name;
    for (char& c : name) {
        if (c == '"' || c == '\\' || c == '\n') {
            c = '_';
        }
    }
    const std::string body = p->source + "\n" + trailer(kernelNames(p->source));
    const std::string text = "#line 1 \"" + name + "\"\n" + body;
    const std::vector<std::string> flags = {"-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-include", header};
    // The key covers everything the object is built from: the compiler, its
    // flags, cudaemu.h, the source and the trailer; not the program's name,
    // which only labels diagnostics (a cached object has none to show).
    std::string keyed = "minerva-cudaemu module v1\n" + cxx + "\n";
    for (const std::string& f : flags) {
        keyed += f + "\n";
    }
    const std::string key = sha256(keyed + sha256(emu) + "\n" + body).substr(0, 32);
    const std::string so = dir + "/" + key + ".so";
    if (access(so.c_str(), R_OK) != 0) {
        // Build under unique names, then rename: processes sharing the
        // cache never load a half-written object.
        static unsigned seq;
        const std::string tmp = dir + "/" + key + "." + std::to_string(getpid()) + "." + std::to_string(++seq);
        const std::string src = tmp + ".cc", out = tmp + ".so", logPath = tmp + ".log";
        if (!writeFile(src, text)) {
            p->log = "minerva-cudaemu: cannot write " + src + "\n";
            return NVRTC_ERROR_INTERNAL_ERROR;
        }
        std::vector<std::string> args = {cxx};
        args.insert(args.end(), flags.begin(), flags.end());
        args.insert(args.end(), {"-x", "c++", src, "-o", out});
        const bool ok = build(args, logPath, &p->log);
        unlink(src.c_str());
        if (!ok) {
            unlink(out.c_str());
            return NVRTC_ERROR_COMPILATION;
        }
        if (rename(out.c_str(), so.c_str()) != 0) {
            p->log += "minerva-cudaemu: cannot rename " + out + ": " + std::strerror(errno) + "\n";
            unlink(out.c_str());
            return NVRTC_ERROR_INTERNAL_ERROR;
        }
    }
    p->image = kImageMagic + so + "\n";
    p->compiled = true;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcVersion(int* major, int* minor) {
    if (major == nullptr || minor == nullptr) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    *major = 12;
    *minor = 4;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int numHeaders,
                                      const char* const* headers, const char* const* includeNames) {
    (void)headers;
    (void)includeNames;
    if (prog == nullptr || src == nullptr || numHeaders < 0) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    if (numHeaders > 0) {
        report("nvrtcCreateProgram: headers are not supported by the emulation");
        return NVRTC_ERROR_INVALID_INPUT;
    }
    std::lock_guard<std::mutex> lk(nvmu);
    nvrtcProgram p = new _nvrtcProgram{};
    p->source = src;
    p->name = name != nullptr ? name : "default_program";
    programs.insert(p);
    *prog = p;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (prog == nullptr || !programs.count(*prog)) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    programs.erase(*prog);
    delete *prog;
    *prog = nullptr;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int numOptions, const char* const* options) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (!programs.count(p)) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    if (numOptions < 0 || (numOptions > 0 && options == nullptr)) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    p->log.clear();
    p->image.clear();
    p->compiled = false;
    for (int i = 0; i < numOptions; ++i) {
        if (options[i] == nullptr || !option(options[i])) {
            p->log = std::string("nvrtc: error: unsupported option '") + (options[i] ? options[i] : "(null)") +
                     "' (the CUDA emulation accepts --gpu-architecture=/-arch=compute_XY, --std=c++17, "
                     "-default-device, --use_fast_math, -lineinfo)\n";
            return NVRTC_ERROR_INVALID_OPTION;
        }
    }
    return compile(p);
}

EXPORT nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t* n) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (!programs.count(p) || !p->compiled) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    if (n == nullptr) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    *n = p->image.size() + 1;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetPTX(nvrtcProgram p, char* out) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (!programs.count(p) || !p->compiled) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    if (out == nullptr) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    std::memcpy(out, p->image.c_str(), p->image.size() + 1);
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t* n) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (!programs.count(p)) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    if (n == nullptr) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    *n = p->log.size() + 1;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char* out) {
    std::lock_guard<std::mutex> lk(nvmu);
    if (!programs.count(p)) {
        return NVRTC_ERROR_INVALID_PROGRAM;
    }
    if (out == nullptr) {
        return NVRTC_ERROR_INVALID_INPUT;
    }
    std::memcpy(out, p->log.c_str(), p->log.size() + 1);
    return NVRTC_SUCCESS;
}

EXPORT const char* nvrtcGetErrorString(nvrtcResult r) {
    static const char* const names[] = {
        "NVRTC_SUCCESS",
        "NVRTC_ERROR_OUT_OF_MEMORY",
        "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        "NVRTC_ERROR_INVALID_INPUT",
        "NVRTC_ERROR_INVALID_PROGRAM",
        "NVRTC_ERROR_INVALID_OPTION",
        "NVRTC_ERROR_COMPILATION",
        "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        "NVRTC_ERROR_INTERNAL_ERROR",
    };
    if (r >= 0 && size_t(r) < sizeof names / sizeof names[0]) {
        return names[r];
    }
    return "NVRTC_ERROR unknown";
}
