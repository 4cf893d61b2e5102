// Register-bound kernel: 96 live accumulators per thread under a 1024-thread launch bound
// (at most 64 registers per thread), so the default ptxas build spills to local memory.
#define N_ACC 96
extern "C" __global__ void __launch_bounds__(1024, 1)
spill_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[N_ACC];
#pragma unroll
  for (int k = 0; k < N_ACC; ++k) acc[k] = x[(i + k * 131) % n];
  for (int s = 0; s < steps; ++s) {
    float v = x[(i + s) % n];
#pragma unroll
    for (int k = 0; k < N_ACC; ++k) acc[k] = acc[k] * v + acc[(k + 7) % N_ACC];
  }
  float out = 0.f;
#pragma unroll
  for (int k = 0; k < N_ACC; ++k) out += acc[k] * (float)(k + 1);
  y[i] = out;
}
