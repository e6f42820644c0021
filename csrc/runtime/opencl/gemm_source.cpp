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
// 32 as 2 x 4, a warp owning 64 x 32 of a 128 x 128 tile of C. Slices of 16
// along k are copied global -> local by cp.async (no registers, no wait) into
// a ring of 4 buffers, 3 slices in flight ahead of the one multiplied, one
// barrier per slice; each operand is staged as it is stored (k- or
// m/n-contiguous), its 16-byte chunks XOR-swizzled against bank conflicts, and
// ldmatrix (.trans where the staged rows run along m or n) makes the
// fragments. 119 registers and 32 KB of local memory: two work-groups (16
// warps) per SM, which is what made it fast (see docs: GEMM on OpenCL).
// KP_MMA_EMULATE computes the same instructions (mma, ldmatrix, cp.async)
// through local memory instead (any device: the layout logic is tested on
// PoCL).
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
/* The tensor-core kernel's shape (defaults; -D in build_options overrides them
 * for tuning, the host reads the work-group size back from the kernel):
 * 128 x 128 tiles of C, KP_MMA_BK-deep slices in KP_MMA_STAGES buffers of
 * local memory filled by cp.async, KP_MMA_WARPS_M x KP_MMA_WARPS_N warps.
 * Measured 4096^3 bf16 on an H200 (TFLOPS; cuBLAS 781): 16 x 4 stages, 2 x 4
 * warps 267 (119 registers: 2 work-groups per SM); 16 x 4, 2 x 2 warps 212;
 * 32 x 3, 2 x 4 warps 195 (163 registers: 1 work-group per SM); 32 x 3,
 * 2 x 2 warps ~150; 32 x 2 148. Occupancy, not pipeline depth, decided it
 * (16 x 6 stages = 16 x 4). */
#define MBM 128
#define MBN 128
#ifndef KP_MMA_BK
#define KP_MMA_BK 16
#endif
#ifndef KP_MMA_STAGES
#define KP_MMA_STAGES 4
#endif
#ifndef KP_MMA_WARPS_M
#define KP_MMA_WARPS_M 2
#endif
#ifndef KP_MMA_WARPS_N
#define KP_MMA_WARPS_N 4
#endif
/* Tiles run in groups of KP_MMA_GROUP tile rows, column by column, so the
 * work-groups in flight share their A and B panels in L2 (1: row order). */
#ifndef KP_MMA_GROUP
#define KP_MMA_GROUP 8
#endif
#define MBK KP_MMA_BK
#define MST KP_MMA_STAGES
#define MNT (32 * KP_MMA_WARPS_M * KP_MMA_WARPS_N)
#define WTM (MBM / KP_MMA_WARPS_M) /* a warp's rows and columns of the tile */
#define WTN (MBN / KP_MMA_WARPS_N)
#define FM (WTM / 16)              /* its m16 x n8 fragments */
#define FN (WTN / 8)
/* Slices are staged as the operand is stored, so cp.async copies them as
 * they are: op(A) k-contiguous (MBM rows of MBK) when A is untransposed, else
 * m-contiguous (MBK rows of MBM); op(B) k-contiguous when B is transposed,
 * else n-contiguous. ldmatrix (.trans for the m/n-contiguous ones) makes the
 * fragments. */
#define A_KM (!KP_TA)
#define B_KM (KP_TB)
#define A_CH ((A_KM ? MBK : MBM) / 8) /* 16-byte chunks per staged row */
#define B_CH ((B_KM ? MBK : MBN) / 8)
#define A_TILE (MBM * MBK)
#define B_TILE (MBN * MBK)
#if MST == 2
#define CP_WAIT_N "0"
#elif MST == 3
#define CP_WAIT_N "1"
#elif MST == 4
#define CP_WAIT_N "2"
#elif MST == 5
#define CP_WAIT_N "3"
#elif MST == 6
#define CP_WAIT_N "4"
#else
#error "KP_MMA_STAGES: 2 to 6"
#endif

inline uint pack2(ushort lo, ushort hi) { return (uint)lo | ((uint)hi << 16); }
inline ushort lo16(uint v) { return (ushort)(v & 0xffffu); }
inline ushort hi16(uint v) { return (ushort)(v >> 16); }

/* Where 16-byte chunk c of staged row r lives in a row of `chunks` chunks:
 * XOR-swizzled so that the 8 rows one ldmatrix matrix reads (8 consecutive
 * rows, same logical chunk) fall in 8 distinct 16-byte bank groups, without
 * padding (padding would not leave room for three stages). */
inline int swz(int r, int c, int chunks) {
  const int rows_per_line = chunks >= 8 ? 1 : 8 / chunks; /* rows per 128 bytes */
  const int span = chunks >= 8 ? 8 : chunks;
  return c ^ ((r / rows_per_line) % span);
}

/* 16 bytes global -> S[offset..offset + 7], asynchronous; bytes < 16 reads
 * that many and zero-fills the rest (the matrix edge). The shared-space
 * address of a __local array is its integer value on NVIDIA's OpenCL: taken
 * once, offsets added in 32 bits (64-bit pointer arithmetic per copy and per
 * ldmatrix cost issue slots the tensor cores were waiting for). */
#if KP_MMA_EMULATE
#define CP_ASYNC16(S, offset, src, bytes)                                                          \
  for (int q_ = 0; q_ < 8; ++q_) (S)[(offset) + q_] = 2 * q_ < (bytes) ? (src)[q_] : (ushort)0;
#define CP_COMMIT()
#define CP_WAIT()
#else
#define CP_ASYNC16(S, offset, src, bytes)                                                          \
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"                                     \
               :: "r"((uint)(size_t)(S) + 2u * (uint)(offset)), "l"((ulong)(size_t)(src)), "r"(bytes) : "memory")
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT() asm volatile("cp.async.wait_group " CP_WAIT_N ";" ::: "memory")
#endif

/* This work-item's share of one operand's slice: rows row0.. (< rows) by
 * columns col0.. (< cols) of the stored matrix X, R staged rows of CH chunks,
 * into S from element base on. interior (uniform: the tile lies inside C, k
 * is a multiple of the slice depth, both operands aligned): unchecked
 * cp.async. vec (16-byte aligned rows: ld, batch stride and buffer offset
 * multiples of 8 elements): bounds-checked cp.async. Otherwise
 * bounds-checked scalar loads stored directly (visible after the same
 * barrier as the copies). */
#define STAGE_COPY(S, base, X, ld, row0, rows, col0, cols, R, CH, vec)                             \
  for (int q = 0; q < ((R) * (CH) + MNT - 1) / MNT; ++q) {                                         \
    const int e = lid + q * MNT;                                                                   \
    if ((R) * (CH) % MNT != 0 && e >= (R) * (CH)) break;                                           \
    const int r = e / (CH), c = e % (CH);                                                          \
    const long gr = (row0) + r, gc = (col0) + c * 8;                                               \
    const int to = (base) + r * (CH) * 8 + swz(r, c, CH) * 8;                                      \
    if (interior) {                                                                                \
      CP_ASYNC16(S, to, X + gr * (ld) + gc, 16);                                                   \
    } else {                                                                                       \
      const long left = gr < (rows) ? min((long)8, max((long)0, (cols) - gc)) : 0;                 \
      if (vec) {                                                                                   \
        CP_ASYNC16(S, to, left > 0 ? X + gr * (ld) + gc : X, (int)left * 2);                       \
      } else {                                                                                     \
        ushort v[8];                                                                               \
        for (int u = 0; u < 8; ++u) v[u] = u < left ? X[gr * (ld) + gc + u] : (ushort)0;          \
        *(__local uint4*)((S) + to) = (uint4)(pack2(v[0], v[1]), pack2(v[2], v[3]),                \
                                              pack2(v[4], v[5]), pack2(v[6], v[7]));               \
      }                                                                                            \
    }                                                                                              \
  }

#define STAGE_A(buf, k0)                                                                           \
  if (A_KM) { STAGE_COPY(As, (buf) * A_TILE, A, lda, i0, m, k0, k, MBM, A_CH, vec_a) }             \
  else { STAGE_COPY(As, (buf) * A_TILE, A, lda, k0, k, i0, m, MBK, A_CH, vec_a) }
#define STAGE_B(buf, k0)                                                                           \
  if (B_KM) { STAGE_COPY(Bs, (buf) * B_TILE, B, ldb, j0, n, k0, k, MBN, B_CH, vec_b) }             \
  else { STAGE_COPY(Bs, (buf) * B_TILE, B, ldb, k0, k, j0, n, MBK, B_CH, vec_b) }

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
/* ldmatrix.x4 (PTX ISA, "ldmatrix"): lane 8i + j names the address of row j
 * of matrix i (8 x 8 of 16-bit values, rows 16 bytes); register i of lane
 * 4g + t receives row g, elements 2t and 2t + 1 of matrix i, or with .trans
 * elements (2t, g) and (2t + 1, g). Each lane publishes its row's offset. */
inline void ldsm_emulated(int trans, const __local ushort* S, int offset, __local int* rows, int lid, uint* r) {
  barrier(CLK_LOCAL_MEM_FENCE);
  rows[lid] = offset;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int base = lid & ~31, lane = lid & 31, g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) {
    if (trans) {
      r[i] = pack2(S[rows[base + 8 * i + 2 * t] + g], S[rows[base + 8 * i + 2 * t + 1] + g]);
    } else {
      const int o = rows[base + 8 * i + g];
      r[i] = pack2(S[o + 2 * t], S[o + 2 * t + 1]);
    }
  }
}
#define MMA(d, a0, a1, a2, a3, b0, b1) mma_emulated(d, a0, a1, a2, a3, b0, b1, em_a, em_b, lid)
#define LDSM(trans, S, offset, r0, r1, r2, r3)                                                    \
  {                                                                                               \
    uint v_[4];                                                                                   \
    ldsm_emulated(trans, S, offset, em_rows, lid, v_);                                            \
    r0 = v_[0]; r1 = v_[1]; r2 = v_[2]; r3 = v_[3];                                               \
  }
#else
#define MMA(d, a0, a1, a2, a3, b0, b1)                                                                  \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE ".f32 "                   \
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                  \
               : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                                 \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
/* S[offset..]: the array's shared-space address plus the offset, in 32 bits (see CP_ASYNC16). */
#define LDSM(trans, S, offset, r0, r1, r2, r3)                                                    \
  if (trans)                                                                                      \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"            \
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)                                         \
                 : "r"((uint)(size_t)(S) + 2u * (uint)(offset)) : "memory");                      \
  else                                                                                            \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"                  \
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)                                         \
                 : "r"((uint)(size_t)(S) + 2u * (uint)(offset)) : "memory")
#endif

/* Loops over fragments are unrolled on NVIDIA (registers, not local arrays);
 * the emulation stays rolled (PoCL would compile every inlined copy). */
#if KP_MMA_EMULATE
#define UNROLL_OK 0
#else
#define UNROLL_OK 1
#endif
__kernel __attribute__((reqd_work_group_size(MNT, 1, 1)))
void kp_gemm_mma(long m, long n, long k,
                 BUF(a), long a_bs, long lda, BUF(b), long b_bs, long ldb,
                 BUF(c), long c_bs, long ldc, float alpha, float beta, int vec_a, int vec_b) {
  __local ushort As[MST * A_TILE] __attribute__((aligned(128)));
  __local ushort Bs[MST * B_TILE] __attribute__((aligned(128)));
#if KP_MMA_EMULATE
  __local uint4 em_a[MNT];
  __local uint2 em_b[MNT];
  __local int em_rows[MNT];
#endif
  const int lid = get_local_id(0);
  const int warp = lid >> 5, lane = lid & 31, g = lane >> 2, t = lane & 3;
  const int lr = lane & 7, lm = lane >> 3; /* ldmatrix: this lane names row lr of matrix lm */
  const int wm = warp / KP_MMA_WARPS_N, wn = warp % KP_MMA_WARPS_N;
  /* Grouped tile order: consecutive work-groups walk KP_MMA_GROUP tile rows down one tile column. */
  const long tiles_n = get_num_groups(0), tiles_m = get_num_groups(1);
  const long pid = get_group_id(1) * tiles_n + get_group_id(0);
  const long per_group = (long)KP_MMA_GROUP * tiles_n;
  const long first_m = (pid / per_group) * KP_MMA_GROUP;
  const long group_m = min(tiles_m - first_m, (long)KP_MMA_GROUP);
  const long i0 = (first_m + (pid % per_group) % group_m) * MBM;
  const long j0 = ((pid % per_group) / group_m) * MBN;
  const long batch = get_group_id(2);
  const __global ushort* A = (const __global ushort*)AT(T, a) + batch * a_bs;
  const __global ushort* B = (const __global ushort*)AT(T, b) + batch * b_bs;
  const int interior = vec_a && vec_b && i0 + MBM <= m && j0 + MBN <= n && k % MBK == 0;
  float acc[FM][FN][4];
#if UNROLL_OK
#pragma unroll
#endif
  for (int x = 0; x < FM; ++x)
#if UNROLL_OK
#pragma unroll
#endif
    for (int y = 0; y < FN; ++y)
#if UNROLL_OK
#pragma unroll
#endif
      for (int h = 0; h < 4; ++h) acc[x][y][h] = 0.0f;

  /* The pipeline: MST - 1 slices in flight ahead of the one multiplied. At
   * slice s: wait for its copies (all but the newest MST - 2 groups), one
   * barrier (everyone's copies visible; everyone done with slice s - 1, whose
   * buffer the copy of slice s + MST - 1 then reuses), multiply. A group is
   * committed every step, empty or not, so the count stays exact. */
  const long slices = (k + MBK - 1) / MBK;
  for (int s = 0; s < MST - 1; ++s) {
    if (s < slices) {
      STAGE_A(s, (long)s * MBK)
      STAGE_B(s, (long)s * MBK)
    }
    CP_COMMIT();
  }
  int cur = 0, next = MST - 1;
  for (long s = 0; s < slices; ++s) {
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (s + MST - 1 < slices) {
      STAGE_A(next, (s + MST - 1) * MBK)
      STAGE_B(next, (s + MST - 1) * MBK)
    }
    CP_COMMIT();
    const int as = cur * A_TILE, bs = cur * B_TILE;
#if UNROLL_OK
#pragma unroll
#endif
    for (int ks = 0; ks < MBK; ks += 16) {
      uint fa[FM][4], fb[FN][2];
      /* A's four 8 x 8 matrices per m16: (rows +0, k +0), (+8, +0), (+0, +8), (+8, +8). */
#if UNROLL_OK
#pragma unroll
#endif
      for (int x = 0; x < FM; ++x) {
        const int rm = wm * WTM + x * 16;
#if !KP_TA
        const int r = rm + lr + (lm & 1) * 8, c = (ks >> 3) + (lm >> 1);
        LDSM(0, As, as + r * (A_CH * 8) + swz(r, c, A_CH) * 8, fa[x][0], fa[x][1], fa[x][2], fa[x][3]);
#else
        const int r = ks + lr + (lm >> 1) * 8, c = (rm >> 3) + (lm & 1);
        LDSM(1, As, as + r * (A_CH * 8) + swz(r, c, A_CH) * 8, fa[x][0], fa[x][1], fa[x][2], fa[x][3]);
#endif
      }
      /* B's per pair of n8 tiles: (tile y, k +0), (y, k +8), (y + 1, k +0), (y + 1, k +8). */
#if UNROLL_OK
#pragma unroll
#endif
      for (int y = 0; y < FN; y += 2) {
        const int cn = wn * WTN + y * 8;
#if KP_TB
        const int r = cn + (lm >> 1) * 8 + lr, c = (ks >> 3) + (lm & 1);
        LDSM(0, Bs, bs + r * (B_CH * 8) + swz(r, c, B_CH) * 8, fb[y][0], fb[y][1], fb[y + 1][0], fb[y + 1][1]);
#else
        const int r = ks + lr + (lm & 1) * 8, c = (cn >> 3) + (lm >> 1);
        LDSM(1, Bs, bs + r * (B_CH * 8) + swz(r, c, B_CH) * 8, fb[y][0], fb[y][1], fb[y + 1][0], fb[y + 1][1]);
#endif
      }
#if UNROLL_OK
#pragma unroll
#endif
      for (int x = 0; x < FM; ++x)
#if UNROLL_OK
#pragma unroll
#endif
        for (int y = 0; y < FN; ++y) MMA(acc[x][y], fa[x][0], fa[x][1], fa[x][2], fa[x][3], fb[y][0], fb[y][1]);
    }
    cur = cur + 1 == MST ? 0 : cur + 1;
    next = next + 1 == MST ? 0 : next + 1;
  }

  __global T* C = AT(T, c) + batch * c_bs;
#if UNROLL_OK
#pragma unroll
#endif
  for (int x = 0; x < FM; ++x) {
#if UNROLL_OK
#pragma unroll
#endif
    for (int y = 0; y < FN; ++y) {
#if UNROLL_OK
#pragma unroll
#endif
      for (int h = 0; h < 4; ++h) {
        const long i = i0 + wm * WTM + x * 16 + g + (h >= 2 ? 8 : 0);
        const long j = j0 + wn * WTN + y * 8 + 2 * t + (h & 1);
        if (i < m && j < n) store_c(C, i * ldc + j, acc[x][y][h], alpha, beta);
      }
    }
  }
}
#endif
)CLC";

}  // namespace kpdr_opencl
