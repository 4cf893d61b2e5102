// out = a * x + y over n floats: a kernel with a scalar argument.
//
// CUDA calling convention of ciq-tune's CUDA objective: pointers to the description's `inputs`
// in order (x, y, out), then its `sizes` as 32-bit ints in order (n), then its `scalars` as 32-bit
// floats in order (a). Kernel parameters arrive as -D macros (BLOCK, ITEMS).
#ifndef BLOCK
#define BLOCK 256  // threads per block
#endif
#ifndef ITEMS
#define ITEMS 1  // elements per thread
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
saxpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, int n,
      float a) {
  const int first = (blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int i = first + k;
    if (i < n) out[i] = a * x[i] + y[i];
  }
}
