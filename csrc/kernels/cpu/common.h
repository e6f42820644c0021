// What the CPU kernel families share, compiled per ISA level with them. Each
// kernel works on float lanes and converts the storage type (float, BF16,
// Half) at load and store; tails narrower than a vector run on scalars.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/vec.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

constexpr int W = Vec::kSize;

template <typename T> inline const T* at(const void* p, int64_t offset) {
  return static_cast<const T*>(p) + offset;
}
template <typename T> inline T* at(void* p, int64_t offset) { return static_cast<T*>(p) + offset; }

// std::vector storage starting on a 64-byte cache line. The attention
// kernels' AMX tiles load and store 64-byte rows, and their scratch rows are
// multiples of 64 bytes: on a line they never straddle two lines, whatever
// malloc returns (16-byte alignment). On the GPU machine's Xeon the gain was
// within its run-to-run noise (about 15%).
template <typename T> struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <typename U> LineAllocator(const LineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <typename U> bool operator==(const LineAllocator<U>&) const { return true; }
  template <typename U> bool operator!=(const LineAllocator<U>&) const { return false; }
};
template <typename T> using LineVector = std::vector<T, LineAllocator<T>>;

// Converts n elements to float.
template <typename T> inline void to_floats(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load(src + i).store(dst + i);
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}

// Calls fn with the kernel's storage type.
template <typename Fn> inline void with_dtype(kpdrDtype dtype, Fn&& fn) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: fn(float{}); break;
    case KPDR_DTYPE_BFLOAT16: fn(BF16{}); break;
    case KPDR_DTYPE_FLOAT16: fn(Half{}); break;
  }
}

// v rounded to T's precision and back (what storing and reloading gives).
template <typename T> inline Vec rounded(Vec v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    T tmp[W];
    v.store(tmp);
    return Vec::load(tmp);
  }
}

// out[i] = value for i in [begin, end): vec(i) gives the Vec at i, scalar(i)
// the float at i (the ends narrower than a vector). With `stream` the vector
// stores are non-temporal, after a scalar head that reaches an address aligned
// to a whole vector; the caller fences (Vec::fence) at the end of its task.
template <typename T, typename VecFn, typename ScalarFn>
inline void write_span(T* out, int64_t begin, int64_t end, bool stream, VecFn&& vec, ScalarFn&& scalar) {
  int64_t i = begin;
  if (stream) {
    constexpr uintptr_t kAlign = W * sizeof(T);
    for (; i < end && reinterpret_cast<uintptr_t>(out + i) % kAlign != 0; ++i) out[i] = from_float<T>(scalar(i));
    for (; i + W <= end; i += W) vec(i).stream(out + i);
  } else {
    for (; i + W <= end; i += W) vec(i).store(out + i);
  }
  for (; i < end; ++i) out[i] = from_float<T>(scalar(i));
}

template <typename T> inline bool vector_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (W * sizeof(T)) == 0;
}

inline void put(Vec v, float* p, bool stream) { stream ? v.stream(p) : v.store(p); }
inline void put(Vec v, BF16* p, bool stream) { stream ? v.stream(p) : v.store(p); }
inline void put(Vec v, Half* p, bool stream) { stream ? v.stream(p) : v.store(p); }

// Asks for the cache lines of [p, p + bytes) into L2 (prefetcht1), for loads
// a little later. Streaming kernels whose arithmetic fills the out-of-order
// window keep too few of their own loads in flight to reach a copy's
// bandwidth on one core, where the hardware prefetchers run only as far
// ahead as those loads.
inline void prefetch_lines(const void* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b, 0, 2);
}

// A chunk: 2 * W consecutive elements as two float vectors. For bfloat16 at
// the AVX-512 levels the vectors are the chunk's even and its odd elements
// (Vec::load_deinterleaved / store_interleaved: a shift and a mask to load,
// no widening or narrowing shuffles, which cost as much as the arithmetic of
// the cheaper kernels); otherwise its two halves. Element-wise arithmetic does
// not care which; an operand that must match lane by lane (a weight, cos and
// sin) is converted once into the same order by chunk_floats.
template <typename T> struct Chunk {
#if defined(KP_VEC_AVX512)
  static constexpr bool kPairs = std::is_same_v<T, BF16>;
#else
  static constexpr bool kPairs = false;
#endif
  static constexpr int64_t kSize = 2 * W;
  // Streaming stores need p aligned to this many bytes.
  static constexpr uintptr_t kAlign = kPairs ? 64 : W * sizeof(T);
  static void load(const T* p, Vec& a, Vec& b) {
#if defined(KP_VEC_AVX512)
    if constexpr (kPairs) {
      Vec::load_deinterleaved(p, a, b);
      return;
    }
#endif
    a = Vec::load(p);
    b = Vec::load(p + W);
  }
  static void store(T* p, Vec a, Vec b, bool stream) {
#if defined(KP_VEC_AVX512)
    if constexpr (kPairs) {
      Vec::store_interleaved(p, a, b, stream);
      return;
    }
#endif
    put(a, p, stream);
    // In address order: stores reach memory in program order, and the
    // compiler, free to swap them, did so, which made float32
    // fused_add_rms_norm's sum pass 25% slower (0.85 -> 0.68 of a copy).
    asm volatile("" ::: "memory");
    put(b, p + W, stream);
  }
  static bool aligned(const T* p) { return reinterpret_cast<uintptr_t>(p) % kAlign == 0; }
#if defined(KP_VEC_AVX512_BF16)
  // Whether sum_squares flushes denormal squares to zero (see there).
  static constexpr bool kSquaresFlushTiny = std::is_same_v<T, BF16>;
#else
  static constexpr bool kSquaresFlushTiny = false;
#endif
  // s0, s1 += the squares of the chunk at p (in some lane order). For
  // bfloat16 with AVX512-BF16 this is one vdpbf16ps of the chunk with itself
  // and no conversion (bfloat16 products are exact in float); the
  // instruction flushes denormal inputs and results to zero, which loses
  // nothing unless the whole sum is tiny (kSquaresFlushTiny: the caller
  // checks, see rms_norm).
  static void sum_squares(const T* p, Vec& s0, Vec& s1) {
#if defined(KP_VEC_AVX512_BF16)
    if constexpr (std::is_same_v<T, BF16>) {
      const __m512bh v = reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
      s0 = {_mm512_dpbf16_ps(s0.v, v, v)};
      return;
    }
#endif
    Vec a, b;
    load(p, a, b);
    s0 = Vec::fmadd(a, a, s0);
    s1 = Vec::fmadd(b, b, s1);
  }
  // store(p, a, b, false), then sum_squares(p, s0, s1) of the rounded values
  // stored, from registers where the rounding is done in them (reading them
  // back cost float32 fused_add_rms_norm 25%).
  static void store_and_sum_squares(T* p, Vec a, Vec b, Vec& s0, Vec& s1) {
    if constexpr (std::is_same_v<T, float>) {
      store(p, a, b, false);
      s0 = Vec::fmadd(a, a, s0);
      s1 = Vec::fmadd(b, b, s1);
      return;
    }
#if defined(KP_VEC_AVX512)
    if constexpr (kPairs) {
      __m512i w;
      if (Vec::pack_interleaved(a, b, w)) {
        _mm512_storeu_si512(p, w);
#if defined(KP_VEC_AVX512_BF16)
        s0 = {_mm512_dpbf16_ps(s0.v, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(w))};
#else
        Vec::unpack_interleaved(w, a, b);
        s0 = Vec::fmadd(a, a, s0);
        s1 = Vec::fmadd(b, b, s1);
#endif
        return;
      }
    }
#endif
    store(p, a, b, false);
    sum_squares(p, s0, s1);
  }
};

// src[0, n) as floats, whole chunks in Chunk<T>'s lane order (so that
// Vec::load(dst + i) and Vec::load(dst + i + W) match Chunk<T>::load(src + i)),
// the tail in order.
template <typename T> inline void chunk_floats(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + Chunk<T>::kSize <= n; i += Chunk<T>::kSize) {
    Vec a, b;
    Chunk<T>::load(src + i, a, b);
    a.store(dst + i);
    b.store(dst + i + W);
  }
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}

// write_span a chunk at a time: chunk(i, a, b) sets the vectors of the chunk
// at i (as Chunk<T>::load gives them), which Chunk<T>::store writes. With
// `stream`, a scalar head first reaches an address aligned for streaming.
template <typename T, typename ChunkFn, typename ScalarFn>
inline void write_chunks(T* out, int64_t begin, int64_t end, bool stream, ChunkFn&& chunk, ScalarFn&& scalar) {
  int64_t i = begin;
  if (stream) {
    for (; i < end && !Chunk<T>::aligned(out + i); ++i) out[i] = from_float<T>(scalar(i));
  }
  for (; i + Chunk<T>::kSize <= end; i += Chunk<T>::kSize) {
    Vec a, b;
    chunk(i, a, b);
    Chunk<T>::store(out + i, a, b, stream);
  }
  for (; i < end; ++i) out[i] = from_float<T>(scalar(i));
}

// Whether stream_bytes streams (else it is memcpy).
#if defined(KP_VEC_AVX512)
constexpr bool kStreamBytes = true;
#else
constexpr bool kStreamBytes = false;
#endif
// bytes (a multiple of 64) from src to 64-byte aligned dst with
// non-temporal stores (the caller fences).
inline void stream_bytes(void* dst, const void* src, int64_t bytes) {
#if defined(KP_VEC_AVX512)
  for (int64_t b = 0; b < bytes; b += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(static_cast<char*>(dst) + b),
                        _mm512_loadu_si512(static_cast<const char*>(src) + b));
  }
#else
  std::memcpy(dst, src, bytes);
#endif
}

// n elements from src to dst, with non-temporal stores where `stream` (the
// caller fences).
template <typename T> inline void copy_elements(T* dst, const T* src, int64_t n, bool stream) {
#if defined(KP_VEC_AVX512)
  if (stream) {
    char* d = reinterpret_cast<char*>(dst);
    const char* s = reinterpret_cast<const char*>(src);
    int64_t bytes = n * int64_t(sizeof(T));
    const int64_t head = std::min<int64_t>(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
    std::memcpy(d, s, head);
    d += head; s += head; bytes -= head;
    for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
    }
    std::memcpy(d, s, bytes);
    return;
  }
#endif
  (void)stream;
  std::memcpy(dst, src, n * sizeof(T));
}


// Rows per task so a task moves at least ~64 KiB.
inline int64_t grain_for(int64_t row_elems) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems)); }

}  // namespace kp::cpu::KP_CPU_CAPABILITY
