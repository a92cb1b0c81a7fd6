// gradcomm-powersgd-cublas-bench: PowerSGD's two skinny products, gradcomm's
// grouped kernels (kernels/powersgd/low_rank_cuda.cu: every matrix of a set in one
// launch) against cuBLAS on the same matrices: one cublasSgemm per matrix, and one
// cublasSgemmGroupedBatched call (each matrix its own group). The matrices are the
// ones PowerSGD compresses in the ResNet-50 and GPT-2-medium sets at rank r
// (bench/common/grad_sets.hpp, the reducer's criterion with min_compression_rate 2).
// Times are CUDA-event medians; every cuBLAS result is checked against gradcomm's
// before it is timed. Needs a GPU (prints why and exits 0 without one).
//
//   gradcomm-powersgd-cublas-bench [--rank R] [--iters N] [-J FILE]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/bench_cli.hpp"
#include "common/bench_util.hpp"
#include "common/device.hpp"
#include "common/grad_sets.hpp"
#include "kernels/powersgd/low_rank.hpp"

namespace {

using gradcomm::bench::check_cuda;
using gradcomm::bench::median;
namespace psgd = gradcomm::kernels::powersgd;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

struct Set {
  std::vector<psgd::LowRankMatrix> mats;
  std::vector<float*> buffers;
  ~Set() {
    for (float* b : buffers) cudaFree(b);
  }
  float* alloc(size_t n) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)), "cudaMalloc");
    buffers.push_back(static_cast<float*>(p));
    return static_cast<float*>(p);
  }
};

// The compressed matrices of `name` at rank r, filled with random values.
void make_set(const std::string& name, int r, Set& s) {
  std::vector<size_t> sizes = gradcomm::bench::grad_set(name), rows = gradcomm::bench::grad_rows(name);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (rows[k] == 0) continue;
    size_t n = rows[k], m = sizes[k] / rows[k];
    if (!((n + m) * static_cast<size_t>(r) * 2 < n * m)) continue;
    psgd::LowRankMatrix mat;
    mat.rows = n;
    mat.cols = m;
    mat.m = s.alloc(n * m);
    mat.p = s.alloc(n * r);
    mat.q = s.alloc(m * r);
    std::vector<float> host(std::max(n * m, m * r));
    for (size_t i = 0; i < n * m; ++i) host[i] = normal(rng);
    check_cuda(cudaMemcpy(mat.m, host.data(), n * m * sizeof(float), cudaMemcpyHostToDevice), "upload M");
    for (size_t i = 0; i < m * r; ++i) host[i] = normal(rng);
    check_cuda(cudaMemcpy(mat.q, host.data(), m * r * sizeof(float), cudaMemcpyHostToDevice), "upload Q");
    // Pageable copies may return before they land; the bench's stream is non-blocking.
    check_cuda(cudaDeviceSynchronize(), "upload");
    s.mats.push_back(mat);
  }
}

template <class F>
double time_us(F&& f, cudaStream_t stream, int iters) {
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    check_cuda(cudaEventRecord(a, stream), "record");
    f();
    check_cuda(cudaEventRecord(b, stream), "record");
    check_cuda(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms * 1000.0);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

// Row-major products through column-major cuBLAS. A row-major X (a x b) is the
// column-major X^T (b x a), leading dimension b.
//   P = M Q     ->  P^T (r x n)  = Q^T (r x m) . M^T (m x n):   gemm(N, N, r, n, m, Q, r, M, m, P, r)
//   Q = M^T P   ->  Q^T (r x m)  = P^T (r x n) . M   (n x m):   gemm(N, T, r, m, n, P, r, M, m, Q, r)
struct Gemm {
  cublasOperation_t tb;
  int mm, nn, kk;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};

Gemm gemm_of(const psgd::LowRankMatrix& x, int r, bool mq, float* out) {
  const int n = static_cast<int>(x.rows), m = static_cast<int>(x.cols);
  if (mq) return Gemm{CUBLAS_OP_N, r, n, m, x.q, r, x.m, m, out, r};
  return Gemm{CUBLAS_OP_T, r, m, n, x.p, r, x.m, m, out, r};
}

// max |a - b| / max |b| over the matrices (a, b device arrays of the same layout).
double max_rel_diff(const std::vector<float*>& a, const std::vector<float*>& b,
                    const std::vector<size_t>& counts) {
  double diff = 0, scale = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    std::vector<float> ha(counts[k]), hb(counts[k]);
    check_cuda(cudaMemcpy(ha.data(), a[k], counts[k] * sizeof(float), cudaMemcpyDeviceToHost), "download");
    check_cuda(cudaMemcpy(hb.data(), b[k], counts[k] * sizeof(float), cudaMemcpyDeviceToHost), "download");
    for (size_t i = 0; i < counts[k]; ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(ha[i] - hb[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(hb[i])));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

void run_set(const std::string& name, int r, int iters, cublasHandle_t handle, cudaStream_t stream,
             FILE* json) {
  Set s;
  make_set(name, r, s);
  const size_t n = s.mats.size();
  const gcommStream_t gs = reinterpret_cast<gcommStream_t>(stream);
  // P from gradcomm's kernel, then Q, so that both products see realistic inputs.
  psgd::cuda::multiply_mq(s.mats.data(), n, r, gs);
  psgd::cuda::orthogonalize(s.mats.data(), n, r, 1e-8f, gs);
  check_cuda(cudaStreamSynchronize(stream), "sync");
  for (bool mq : {true, false}) {
    // cuBLAS writes into its own outputs; gradcomm's are the matrices' p / q.
    std::vector<float*> ours, theirs;
    std::vector<size_t> counts;
    std::vector<Gemm> gemms;
    for (const auto& x : s.mats) {
      size_t count = (mq ? x.rows : x.cols) * r;
      float* out = s.alloc(count);
      theirs.push_back(out);
      ours.push_back(mq ? x.p : x.q);
      counts.push_back(count);
      gemms.push_back(gemm_of(x, r, mq, out));
    }
    auto run_ours = [&] {
      if (mq)
        psgd::cuda::multiply_mq(s.mats.data(), n, r, gs);
      else
        psgd::cuda::multiply_mtp(s.mats.data(), n, r, nullptr, gs);
    };
    const float one = 1.0f, zero = 0.0f;
    auto run_loop = [&] {
      for (const Gemm& g : gemms)
        check_cublas(cublasSgemm(handle, CUBLAS_OP_N, g.tb, g.mm, g.nn, g.kk, &one, g.a, g.lda, g.b, g.ldb,
                                 &zero, g.c, g.ldc),
                     "cublasSgemm");
    };
    // Grouped: host arrays of shapes, device arrays of pointers.
    std::vector<cublasOperation_t> ta(n, CUBLAS_OP_N), tb(n);
    std::vector<int> mm(n), nn(n), kk(n), lda(n), ldb(n), ldc(n), group(n, 1);
    std::vector<float> alpha(n, 1.0f), beta(n, 0.0f);
    std::vector<const float*> pa(n), pb(n);
    std::vector<float*> pc(n);
    for (size_t k = 0; k < n; ++k) {
      const Gemm& g = gemms[k];
      tb[k] = g.tb, mm[k] = g.mm, nn[k] = g.nn, kk[k] = g.kk, lda[k] = g.lda, ldb[k] = g.ldb, ldc[k] = g.ldc;
      pa[k] = g.a, pb[k] = g.b, pc[k] = g.c;
    }
    void* dptr = nullptr;
    check_cuda(cudaMalloc(&dptr, 3 * n * sizeof(void*)), "cudaMalloc pointers");
    auto** da = static_cast<const float**>(dptr);
    const float** db = da + n;
    float** dc = static_cast<float**>(dptr) + 2 * n;
    check_cuda(cudaMemcpy(da, pa.data(), n * sizeof(void*), cudaMemcpyHostToDevice), "pointers");
    check_cuda(cudaMemcpy(db, pb.data(), n * sizeof(void*), cudaMemcpyHostToDevice), "pointers");
    check_cuda(cudaMemcpy(dc, pc.data(), n * sizeof(void*), cudaMemcpyHostToDevice), "pointers");
    check_cuda(cudaDeviceSynchronize(), "pointers");  // landed before the non-blocking stream reads them
    auto run_grouped = [&] {
      check_cublas(cublasSgemmGroupedBatched(handle, ta.data(), tb.data(), mm.data(), nn.data(), kk.data(),
                                             alpha.data(), da, lda.data(), db, ldb.data(), beta.data(), dc,
                                             ldc.data(), static_cast<int>(n), group.data()),
                   "cublasSgemmGroupedBatched");
    };
    run_ours();
    run_loop();
    check_cuda(cudaStreamSynchronize(stream), "sync");
    const double loop_diff = max_rel_diff(theirs, ours, counts);
    for (size_t k = 0; k < n; ++k)
      check_cuda(cudaMemsetAsync(theirs[k], 0, counts[k] * sizeof(float), stream), "clear");
    run_grouped();
    check_cuda(cudaStreamSynchronize(stream), "sync");
    const double grouped_diff = max_rel_diff(theirs, ours, counts);
    if (!(loop_diff < 1e-3) || !(grouped_diff < 1e-3))
      throw std::runtime_error(name + (mq ? " P = M Q" : " Q = M^T P") + ": cuBLAS and gradcomm differ (" +
                               std::to_string(loop_diff) + ", " + std::to_string(grouped_diff) + ")");
    const double ours_us = time_us(run_ours, stream, iters);
    const double loop_us = time_us(run_loop, stream, iters);
    const double grouped_us = time_us(run_grouped, stream, iters);
    cudaFree(dptr);
    const char* op = mq ? "P=MQ" : "Q=MtP";
    std::printf(
        "%-12s %-6s %4zu matrices  gradcomm %9.1f us  cuBLAS per matrix %9.1f us (%.2fx)  cuBLAS grouped "
        "%9.1f us "
        "(%.2fx)  max rel diff %.1e\n",
        name.c_str(), op, n, ours_us, loop_us, loop_us / ours_us, grouped_us, grouped_us / ours_us,
        std::max(loop_diff, grouped_diff));
    if (json != nullptr)
      std::fprintf(json,
                   "{\"bench\": \"powersgd_products\", \"set\": \"%s\", \"op\": \"%s\", \"rank\": %d, "
                   "\"matrices\": %zu, "
                   "\"gradcomm_us\": %.2f, \"cublas_loop_us\": %.2f, \"cublas_grouped_us\": %.2f, "
                   "\"max_rel_diff\": %.3g}\n",
                   name.c_str(), op, r, n, ours_us, loop_us, grouped_us, std::max(loop_diff, grouped_diff));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int r = 4, iters = 20;
  std::string json_path;
  const char* program = "gradcomm-powersgd-cublas-bench";
  CLI::App app{
      "PowerSGD's two products (P = M Q, Q = Mt P) on both gradient sets: gradcomm's grouped kernels "
      "against one cublasSgemm per matrix and one grouped cuBLAS call (a GPU is needed)."};
  app.add_option("--rank", r, "PowerSGD's rank")->capture_default_str()->check(CLI::Range(1, psgd::kMaxRank));
  app.add_option("--iters", iters, "timed repetitions (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("-J", json_path, "JSON lines file");
  if (auto code = gradcomm::bench::parse_command_line(app, argc, argv, program)) return *code;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    (void)cudaGetLastError();
    std::printf("gradcomm-powersgd-cublas-bench: no GPU here (%s); nothing to measure\n",
                gradcomm::no_gpu_reason().c_str());
    return 0;
  }
  FILE* json = nullptr;
  if (!gradcomm::bench::open_json(json_path, program, json)) return 2;
  try {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    cublasHandle_t handle = nullptr;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
    std::printf(
        "# gradcomm-powersgd-cublas-bench: rank %d, CUDA-event medians of %d runs; (x) = cuBLAS / gradcomm\n",
        r, iters);
    for (const char* set : {"resnet50", "gpt2_medium"}) run_set(set, r, iters, handle, stream, json);
    cublasDestroy(handle);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcomm-powersgd-cublas-bench: %s\n", e.what());
    return 1;
  }
  if (json != nullptr) std::fclose(json);
  return 0;
}
