// emuhost.h: what the CPU emulations of the GPU languages share, included by
// their shims (codegen/cuda/testdata/cudaemu.h, codegen/metal/testdata/
// mslshim.h): IEEE binary16 conversions, and the buffers the emulation
// mains (codegen/gpu/gputest, emulator.go) read from files, hand to the
// kernels and write back.
//
// Every definition is inline and hidden: the emulated CUDA driver
// (runtime/cuda/testdata/emudriver) dlopens one object per module, built
// with cudaemu.h, and each keeps its own. That driver keys its object cache
// on cudaemu.h's text alone, so cudaemu.h carries this file's SHA-256 and
// a test of codegen/cuda (TestEmuHostPinned) fails until it is updated
// after an edit here.
#ifndef EMUHOST_H
#define EMUHOST_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// EMUHOST_LOAD_SLACK: bytes a shim wants allocated past the end of each
// loaded buffer (capacity only: the size stays the file's), so that a
// stray read just past the end stays in bounds.
#ifndef EMUHOST_LOAD_SLACK
#define EMUHOST_LOAD_SLACK 0
#endif

#pragma GCC visibility push(hidden)

namespace emuhost {
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
        std::fprintf(stderr, "emuhost: cannot open %s\n", path);
        std::exit(2);
    }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    b.data.resize(size_t(n) + EMUHOST_LOAD_SLACK);
    if (n > 0 && std::fread(b.data.data(), 1, size_t(n), f) != size_t(n)) {
        std::fprintf(stderr, "emuhost: short read of %s\n", path);
        std::exit(2);
    }
    b.data.resize(size_t(n));
    std::fclose(f);
    return b;
}

inline void save(const char* path, const Buf& b) {
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(b.data.data(), 1, b.data.size(), f) != b.data.size()) {
        std::fprintf(stderr, "emuhost: cannot write %s\n", path);
        std::exit(2);
    }
    std::fclose(f);
}
} // namespace emuhost

#pragma GCC visibility pop
#endif
