// OpenCL C of the GEMM entry (kpdrGemmArgs, gemm.cpp). Two kernels:
//
// kp_gemm: portable, any device. A work-group of WX x WY work-items computes a
// BM x BN tile of C (BM = WY * 4 * RM, BN = WX * 4 * RN); each work-item owns
// RM x RN blocks of 4 x 4 (8 x 8 with RM = RN = 2, strided by BM / RM so the
// float4 reads of local memory are broadcast or consecutive). Slices of BK
// columns of op(A) and rows of op(B) are staged in local memory as float,
// double-buffered: the next slice is read from global memory into registers
// while the current one is multiplied, so one barrier per slice suffices.
//
// kp_gemm_mma (KP_MMA, 16-bit dtypes on NVIDIA sm_80+): tensor cores through
// inline PTX (mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}); NVIDIA's
// OpenCL compiler passes asm() through to ptxas. 256 work-items = 8 warps of
// 32 as 2 x 4, a warp owning 64 x 32 of a 128 x 128 tile of C; slices of 64
// along k are staged as raw 16-bit values, k-contiguous for both operands
// ([row of C][k] and [column of C][k], rows padded by 8 elements so a warp's
// fragment reads hit 32 distinct banks) and read into fragments with
// ldmatrix. KP_MMA_EMULATE computes the same
// instruction through local memory instead (any device: the layout logic is
// tested on PoCL).
//
// Every tensor arrives as (buffer, byte offset). Products accumulate in float.
#include "gemm_source.h"

namespace kpdr_opencl {

const char* const kGemmSource = R"CLC(
#define BUF(n) __global uchar* n##_b, ulong n##_o
#define AT(ty, n) ((__global ty*)(n##_b + n##_o))

#if KP_DTYPE == 0
typedef float T;
inline float ld(const __global float* p, long i) { return p[i]; }
inline void st(__global float* p, long i, float v) { p[i] = v; }
#elif KP_DTYPE == 1
typedef half T;
inline float ld(const __global half* p, long i) { return vload_half((size_t)i, p); }
inline void st(__global half* p, long i, float v) { vstore_half_rte(v, (size_t)i, p); }
#else
typedef ushort T;
inline float ld(const __global ushort* p, long i) { return as_float(((uint)p[i]) << 16); }
inline void st(__global ushort* p, long i, float v) {
  uint u = as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) { p[i] = (ushort)((u >> 16) | 0x40u); return; }  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
  p[i] = (ushort)(u >> 16);
}
#endif

/* C[at] = alpha * acc + beta * C[at]; beta == 0 never reads C (BLAS: NaN there does not leak). */
inline void store_c(__global T* C, long at, float acc, float alpha, float beta) {
  st(C, at, beta == 0.0f ? alpha * acc : alpha * acc + beta * ld(C, at));
}

/* The transpositions are compiled in (KP_TA, KP_TB): every index below is
 * then affine in the loop counters, without selects. */
#define ta KP_TA
#define tb KP_TB

#define TM (4 * RM)
#define TN (4 * RN)
#define BM (WY * TM)
#define BN (WX * TN)
#define NT (WX * WY)
#define LA (BM * BK / NT)
#define LB (BN * BK / NT)

/* Reads this work-item's share of the slice at k0 into registers (zero outside
 * the matrices). Element e of the BM x BK slice of op(A) runs along the stored
 * matrix's contiguous dimension, so consecutive work-items read consecutive
 * addresses whichever the transposition; likewise for op(B). */
#define READ_SLICE(k0)                                                                  \
  for (int q = 0; q < LA; ++q) {                                                        \
    const int e = tid + q * NT;                                                         \
    const int p = ta ? e / BM : e % BK, i = ta ? e % BM : e / BK;                       \
    const long gi = i0 + i, gp = (k0) + p;                                              \
    ra[q] = (gi < m && gp < k) ? ld(A, ta ? gp * lda + gi : gi * lda + gp) : 0.0f;      \
  }                                                                                     \
  for (int q = 0; q < LB; ++q) {                                                        \
    const int e = tid + q * NT;                                                         \
    const int p = tb ? e % BK : e / BN, j = tb ? e / BK : e % BN;                       \
    const long gj = j0 + j, gp = (k0) + p;                                              \
    rb[q] = (gj < n && gp < k) ? ld(B, tb ? gj * ldb + gp : gp * ldb + gj) : 0.0f;      \
  }

#define WRITE_SLICE(buf)                                                                \
  for (int q = 0; q < LA; ++q) {                                                        \
    const int e = tid + q * NT;                                                         \
    const int p = ta ? e / BM : e % BK, i = ta ? e % BM : e / BK;                       \
    As[buf][p][i] = ra[q];                                                              \
  }                                                                                     \
  for (int q = 0; q < LB; ++q) {                                                        \
    const int e = tid + q * NT;                                                         \
    const int p = tb ? e % BK : e / BN, j = tb ? e / BK : e % BN;                       \
    Bs[buf][p][j] = rb[q];                                                              \
  }

__kernel __attribute__((reqd_work_group_size(WX, WY, 1)))
void kp_gemm(long m, long n, long k,
             BUF(a), long a_bs, long lda, BUF(b), long b_bs, long ldb,
             BUF(c), long c_bs, long ldc, float alpha, float beta) {
  /* Rows padded by 4 floats: the slice writes of an untransposed A (and a
   * transposed B) step through p, which would otherwise hit one bank. */
  __local float As[2][BK][BM + 4] __attribute__((aligned(16)));
  __local float Bs[2][BK][BN + 4] __attribute__((aligned(16)));
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int tid = ly * WX + lx;
  const long i0 = get_group_id(1) * (long)BM, j0 = get_group_id(0) * (long)BN;
  const long batch = get_group_id(2);
  const __global T* A = AT(T, a) + batch * a_bs;
  const __global T* B = AT(T, b) + batch * b_bs;
  float ra[LA], rb[LB];
  float acc[TM][TN];
  for (int x = 0; x < TM; ++x)
    for (int y = 0; y < TN; ++y) acc[x][y] = 0.0f;

  const long slices = (k + BK - 1) / BK;
  if (slices > 0) {
    READ_SLICE(0)
    WRITE_SLICE(0)
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long s = 0; s < slices; ++s) {
    const int cur = s & 1;
    if (s + 1 < slices) { READ_SLICE((s + 1) * BK) }
    for (int p = 0; p < BK; ++p) {
      float4 av[RM], bv[RN];
      for (int r = 0; r < RM; ++r) av[r] = *(const __local float4*)&As[cur][p][r * (BM / RM) + ly * 4];
      for (int r = 0; r < RN; ++r) bv[r] = *(const __local float4*)&Bs[cur][p][r * (BN / RN) + lx * 4];
      for (int r = 0; r < RM; ++r) {
        const float ax[4] = {av[r].x, av[r].y, av[r].z, av[r].w};
        for (int x = 0; x < 4; ++x) {
          for (int t = 0; t < RN; ++t) {
            acc[4 * r + x][4 * t + 0] = mad(ax[x], bv[t].x, acc[4 * r + x][4 * t + 0]);
            acc[4 * r + x][4 * t + 1] = mad(ax[x], bv[t].y, acc[4 * r + x][4 * t + 1]);
            acc[4 * r + x][4 * t + 2] = mad(ax[x], bv[t].z, acc[4 * r + x][4 * t + 2]);
            acc[4 * r + x][4 * t + 3] = mad(ax[x], bv[t].w, acc[4 * r + x][4 * t + 3]);
          }
        }
      }
    }
    if (s + 1 < slices) { WRITE_SLICE(cur ^ 1) }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  __global T* C = AT(T, c) + batch * c_bs;
  for (int r = 0; r < RM; ++r) {
    for (int x = 0; x < 4; ++x) {
      const long i = i0 + r * (BM / RM) + ly * 4 + x;
      if (i >= m) continue;
      for (int t = 0; t < RN; ++t) {
        for (int y = 0; y < 4; ++y) {
          const long j = j0 + t * (BN / RN) + lx * 4 + y;
          if (j < n) store_c(C, i * ldc + j, acc[4 * r + x][4 * t + y], alpha, beta);
        }
      }
    }
  }
}

#if KP_MMA
#define MBM 128
#define MBN 128
/* Slice depth: 64, single-buffered (37 KB of local memory: twice the
 * tensor-core work per slice to hide the next slice's global reads behind,
 * two barriers per slice), or, with -DKP_MMA_BK=32, 32 double-buffered
 * (40 KB). OpenCL on NVIDIA offers 48 KB of local memory per work-group, too
 * little for 64 double-buffered. On the H100: 64 gave 130.6 TFLOPS (bf16
 * 4096^3), 32 gave 124.4. */
#ifndef KP_MMA_BK
#define KP_MMA_BK 64
#endif
#define MBK KP_MMA_BK
#define MBUFS (MBK == 32 ? 2 : 1)
#define MLD (MBK + 8)  /* 16-bit elements per staged row: 20 (36) words, fragment reads conflict-free */
#define MKC (MBK / 8)  /* 8-element chunks per staged row */
#define MREG (MBK / 16) /* uint4 registers per work-item and operand */

inline uint pack2(ushort lo, ushort hi) { return (uint)lo | ((uint)hi << 16); }

/* Stored elements (r, c..c+7) of a rows x cols matrix with leading dimension
 * ld, as 4 packed pairs (lower column in the low half); zero outside. vec: a
 * 16-byte load is aligned (ld, batch stride and buffer offset multiples of 8). */
inline uint4 load8(const __global ushort* M, long rows, long cols, long ld, long r, long c, int vec) {
  if (vec && r < rows && c + 8 <= cols) return *(const __global uint4*)(M + r * ld + c);
  ushort v[8];
  for (int q = 0; q < 8; ++q) v[q] = (r < rows && c + q < cols) ? M[r * ld + c + q] : (ushort)0;
  return (uint4)(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
}

inline ushort lo16(uint v) { return (ushort)(v & 0xffffu); }
inline ushort hi16(uint v) { return (ushort)(v >> 16); }

/* One operand's 128 x 32 slice (rows of C or columns of C, by k), staged
 * k-contiguous. kmajor: the stored matrix runs along k (A untransposed, B
 * transposed): two 8-element row pieces per work-item, copied as is.
 * Otherwise the stored rows are k: each work-item reads the same 8 columns of
 * rows k and k + 1 and writes them as 8 packed (k, k + 1) pairs. */
#define MMA_READ(X, reg, kmajor, rows_mn, ld, mn0, k0, vec)                               \
  if (kmajor) {                                                                            \
    for (int q = 0; q < MREG; ++q) {                                                       \
      const int id = lid + q * 256;                                                        \
      reg[q] = load8(X, rows_mn, k, ld, (mn0) + id / MKC, (k0) + (id % MKC) * 8, vec);     \
    }                                                                                      \
  } else {                                                                                 \
    for (int q = 0; q < MREG / 2; ++q) {                                                   \
      const int u = lid + q * 256, kp = u % (MBK / 2), mc = (u / (MBK / 2)) * 8;           \
      reg[2 * q] = load8(X, k, rows_mn, ld, (k0) + 2 * kp, (mn0) + mc, vec);               \
      reg[2 * q + 1] = load8(X, k, rows_mn, ld, (k0) + 2 * kp + 1, (mn0) + mc, vec);       \
    }                                                                                      \
  }

#define MMA_WRITE(S, reg, kmajor)                                                          \
  if (kmajor) {                                                                            \
    for (int q = 0; q < MREG; ++q) {                                                       \
      const int id = lid + q * 256;                                                        \
      *(__local uint4*)&S[(id / MKC) * MLD + (id % MKC) * 8] = reg[q];                     \
    }                                                                                      \
  } else {                                                                                 \
    for (int r = 0; r < MREG / 2; ++r) {                                                   \
      const int u = lid + r * 256, kp = u % (MBK / 2), mc = (u / (MBK / 2)) * 8;           \
      const uint lo[4] = {reg[2 * r].x, reg[2 * r].y, reg[2 * r].z, reg[2 * r].w};         \
      const uint hi[4] = {reg[2 * r + 1].x, reg[2 * r + 1].y, reg[2 * r + 1].z, reg[2 * r + 1].w}; \
      for (int q = 0; q < 4; ++q) {                                                        \
        *(__local uint*)&S[(mc + 2 * q) * MLD + 2 * kp] = pack2(lo16(lo[q]), lo16(hi[q])); \
        *(__local uint*)&S[(mc + 2 * q + 1) * MLD + 2 * kp] = pack2(hi16(lo[q]), hi16(hi[q])); \
      }                                                                                    \
    }                                                                                      \
  }

/* KP_LDMATRIX (default 1; -DKP_LDMATRIX=0 reads each fragment register with
 * a 32-bit local load instead): fragments through ldmatrix.x4, one
 * instruction per 4 registers, given the shared-space address of a __local
 * pointer (its integer value on NVIDIA's OpenCL). 139.0 against 130.6 TFLOPS
 * on the H100. The emulation reads registers directly. */
#ifndef KP_LDMATRIX
#define KP_LDMATRIX 1
#endif
#if KP_MMA_EMULATE
#undef KP_LDMATRIX
#define KP_LDMATRIX 0
#endif
#define LDSM_X4(r0, r1, r2, r3, address)                                                        \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"                  \
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address) : "memory")

#if KP_DTYPE == 1
#define MMA_TYPE "f16"
#else
#define MMA_TYPE "bf16"
#endif

#if KP_MMA_EMULATE
inline float bits_to_float(ushort h) {
#if KP_DTYPE == 1
  return vload_half(0, (const half*)&h);
#else
  return as_float(((uint)h) << 16);
#endif
}
/* The instruction's semantics (PTX ISA, "Matrix fragments for
 * mma.m16n8k16"): lane = 4 * g + t; A regs (row g, k 2t..2t+1), (row g + 8,
 * k 2t..), (row g, k 2t + 8..), (row g + 8, k 2t + 8..); B regs (k 2t..2t+1,
 * column g), (k 2t + 8.., column g); C/D (row g, columns 2t, 2t + 1), (row g
 * + 8, same columns). Each lane publishes its fragments, then computes its
 * four outputs from the warp's. Called uniformly by the whole work-group. */
inline void mma_emulated(float* d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1,
                         __local uint4* ea, __local uint2* eb, int lid) {
  barrier(CLK_LOCAL_MEM_FENCE);
  ea[lid] = (uint4)(a0, a1, a2, a3);
  eb[lid] = (uint2)(b0, b1);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int base = lid & ~31, lane = lid & 31, g = lane >> 2, t = lane & 3;
  for (int h = 0; h < 4; ++h) {
    const int row = g + (h >= 2 ? 8 : 0), col = 2 * t + (h & 1);
    float s = 0.0f;
    for (int kk = 0; kk < 16; ++kk) {
      const int owner = (kk & 7) >> 1;
      const uint4 av = ea[base + (row & 7) * 4 + owner];
      const uint ar[4] = {av.x, av.y, av.z, av.w};
      const uint a = ar[(row >= 8 ? 1 : 0) + (kk >= 8 ? 2 : 0)];
      const uint2 bv = eb[base + col * 4 + owner];
      const uint b = kk >= 8 ? bv.y : bv.x;
      s += bits_to_float((kk & 1) ? hi16(a) : lo16(a)) * bits_to_float((kk & 1) ? hi16(b) : lo16(b));
    }
    d[h] += s;
  }
}
#define MMA(d, a0, a1, a2, a3, b0, b1) mma_emulated(d, a0, a1, a2, a3, b0, b1, em_a, em_b, lid)
#else
#define MMA(d, a0, a1, a2, a3, b0, b1)                                                                  \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE ".f32 "                   \
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                  \
               : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                                 \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
#endif

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void kp_gemm_mma(long m, long n, long k,
                 BUF(a), long a_bs, long lda, BUF(b), long b_bs, long ldb,
                 BUF(c), long c_bs, long ldc, float alpha, float beta, int vec_a, int vec_b) {
  __local ushort As[MBUFS][MBM * MLD] __attribute__((aligned(16)));
  __local ushort Bs[MBUFS][MBN * MLD] __attribute__((aligned(16)));
#if KP_MMA_EMULATE
  __local uint4 em_a[256];
  __local uint2 em_b[256];
#endif
  const int lid = get_local_id(0);
  const int warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;  /* the warp's 64 x 32 of the tile */
  const long i0 = get_group_id(1) * (long)MBM, j0 = get_group_id(0) * (long)MBN;
  const long batch = get_group_id(2);
  const __global ushort* A = (const __global ushort*)AT(T, a) + batch * a_bs;
  const __global ushort* B = (const __global ushort*)AT(T, b) + batch * b_bs;
  const int a_kmajor = !ta, b_kmajor = tb;
  uint4 ra[MREG], rb[MREG];
  float acc[4][4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y)
#pragma unroll
      for (int h = 0; h < 4; ++h) acc[x][y][h] = 0.0f;

  const long slices = (k + MBK - 1) / MBK;
  if (slices > 0) {
    MMA_READ(A, ra, a_kmajor, m, lda, i0, 0, vec_a)
    MMA_READ(B, rb, b_kmajor, n, ldb, j0, 0, vec_b)
    MMA_WRITE(As[0], ra, a_kmajor)
    MMA_WRITE(Bs[0], rb, b_kmajor)
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long s = 0; s < slices; ++s) {
    const int cur = MBUFS == 2 ? (s & 1) : 0;
    if (s + 1 < slices) {
      MMA_READ(A, ra, a_kmajor, m, lda, i0, (s + 1) * MBK, vec_a)
      MMA_READ(B, rb, b_kmajor, n, ldb, j0, (s + 1) * MBK, vec_b)
    }
#if !KP_MMA_EMULATE  /* unrolled, PoCL would compile 32 inlined copies of the emulation */
#pragma unroll
#endif
    for (int ks = 0; ks < MBK; ks += 16) {
      uint fa[4][4], fb[4][2];
#if KP_LDMATRIX
      /* ldmatrix.x4: lane l names row l & 7 of matrix l >> 3; A's four 8 x 8
       * matrices are (rows +0, k +0), (+8, +0), (+0, +8), (+8, +8); B's are
       * two column tiles by (k +0, k +8). One instruction per 4 registers. */
      const int lr = lane & 7, lm = lane >> 3;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const uint address = (uint)(size_t)&As[cur][(wm * 64 + x * 16 + lr + (lm & 1) * 8) * MLD + ks + (lm >> 1) * 8];
        LDSM_X4(fa[x][0], fa[x][1], fa[x][2], fa[x][3], address);
      }
#pragma unroll
      for (int y = 0; y < 4; y += 2) {
        const uint address = (uint)(size_t)&Bs[cur][(wn * 32 + y * 8 + (lm >> 1) * 8 + lr) * MLD + ks + (lm & 1) * 8];
        LDSM_X4(fb[y][0], fb[y][1], fb[y + 1][0], fb[y + 1][1], address);
      }
#else
      const __local uint* as = (const __local uint*)As[cur];
      const __local uint* bs = (const __local uint*)Bs[cur];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int row = wm * 64 + x * 16 + g;
        const int col = (ks >> 1) + t;  /* in 32-bit words: k = ks + 2t */
        fa[x][0] = as[row * (MLD / 2) + col];
        fa[x][1] = as[(row + 8) * (MLD / 2) + col];
        fa[x][2] = as[row * (MLD / 2) + col + 4];
        fa[x][3] = as[(row + 8) * (MLD / 2) + col + 4];
      }
#pragma unroll
      for (int y = 0; y < 4; ++y) {
        const int cn = wn * 32 + y * 8 + g;
        const int col = (ks >> 1) + t;
        fb[y][0] = bs[cn * (MLD / 2) + col];
        fb[y][1] = bs[cn * (MLD / 2) + col + 4];
      }
#endif
#if !KP_MMA_EMULATE
#pragma unroll
#endif
      for (int x = 0; x < 4; ++x)
#if !KP_MMA_EMULATE
#pragma unroll
#endif
        for (int y = 0; y < 4; ++y) MMA(acc[x][y], fa[x][0], fa[x][1], fa[x][2], fa[x][3], fb[y][0], fb[y][1]);
    }
#if MBUFS == 1
    barrier(CLK_LOCAL_MEM_FENCE);  /* everyone is done reading the one buffer */
#endif
    if (s + 1 < slices) {
      MMA_WRITE(As[MBUFS == 2 ? cur ^ 1 : 0], ra, a_kmajor)
      MMA_WRITE(Bs[MBUFS == 2 ? cur ^ 1 : 0], rb, b_kmajor)
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  __global T* C = AT(T, c) + batch * c_bs;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
#pragma unroll
    for (int y = 0; y < 4; ++y) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const long i = i0 + wm * 64 + x * 16 + g + (h >= 2 ? 8 : 0);
        const long j = j0 + wn * 32 + y * 8 + 2 * t + (h & 1);
        if (i < m && j < n) store_c(C, i * ldc + j, acc[x][y][h], alpha, beta);
      }
    }
  }
}
#endif
)CLC";

}  // namespace kpdr_opencl
