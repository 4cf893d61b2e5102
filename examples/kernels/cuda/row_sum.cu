// Row sums of a float32 matrix: out[r] = sum_c x[r, c]. Memory-bound; tuned over the kernel
// parameters below (passed as -D macros by ciq-tune's CUDA objective) and nvcc/ptxas controls.
//
// Launch convention of the CUDA objective: pointers to the description's `inputs` in order, then
// its `sizes` as 32-bit ints in order.
#ifndef BLOCK
#define BLOCK 256  // threads per block, a multiple of 32
#endif
#ifndef ROWS
#define ROWS 1  // rows per block
#endif
#ifndef VEC
#define VEC 4  // floats per load: 1, 2 or 4 (rows must then start on VEC·4-byte boundaries)
#endif
#ifndef UNROLL
#define UNROLL 4  // unroll factor of the strided loop
#endif

// `#pragma unroll` does not expand macros; it takes a constant expression.
constexpr int kUnroll = UNROLL;

template <int N> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float hsum(float v) { return v; }
__device__ __forceinline__ float hsum(float2 v) { return v.x + v.y; }
__device__ __forceinline__ float hsum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

extern "C" __global__ void __launch_bounds__(BLOCK)
row_sum(const float* __restrict__ x, float* __restrict__ out, int R, int C) {
  using V = typename Vec<VEC>::T;
  __shared__ float warp_sums[BLOCK / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int r_end = min(R, (int)(blockIdx.x + 1) * ROWS);
  for (int r = blockIdx.x * ROWS; r < r_end; ++r) {
    const float* row = x + (size_t)r * C;
    const V* row_v = reinterpret_cast<const V*>(row);
    const int n_vec = C / VEC;
    float acc = 0.0f;
#pragma unroll kUnroll
    for (int i = threadIdx.x; i < n_vec; i += BLOCK) acc += hsum(row_v[i]);
    for (int i = n_vec * VEC + threadIdx.x; i < C; i += BLOCK) acc += row[i];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < BLOCK / 32 ? warp_sums[lane] : 0.0f;
      for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
      if (lane == 0) out[r] = acc;
    }
    __syncthreads();  // warp_sums is reused by the next row
  }
}
