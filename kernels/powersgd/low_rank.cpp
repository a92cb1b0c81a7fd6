// Validation, dispatch and the deterministic initial Q (the host twins: low_rank_host.cpp).
#include "kernels/powersgd/low_rank.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/dispatch.hpp"

namespace gradcomm::kernels::powersgd {

namespace {

// splitmix64: a counter-based hash, so any element of Q is computed alone.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// (0, 1], from the top 53 bits.
double unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

}  // namespace

void validate(const LowRankMatrix* mats, size_t n, int r) {
  require(r >= 1 && r <= kMaxRank, "rank ", r, " is outside 1..", kMaxRank);
  require(mats != nullptr || n == 0, "the matrix list is NULL but its count is ", n);
  for (size_t k = 0; k < n; ++k) {
    const LowRankMatrix& a = mats[k];
    require(a.rows > 0 && a.cols > 0, "matrix ", k, " is ", a.rows, " x ", a.cols,
            ": both sizes must be > 0");
    require(a.rows <= SIZE_MAX / a.cols / sizeof(float), "matrix ", k, ": ", a.rows, " x ", a.cols,
            " overflows");
    require(a.rows <= UINT32_MAX && a.cols <= UINT32_MAX, "matrix ", k,
            ": sizes above 2^32 are not supported");
    require(a.m != nullptr && a.p != nullptr && a.q != nullptr, "matrix ", k,
            ": m, p and q must not be NULL");
  }
}

void initial_q(uint64_t seed, uint64_t index, size_t cols, int r, float* out) {
  // Box-Muller on two hashed uniforms per element, in double on the host: the
  // bits depend on nothing but (seed, index, element).
  const uint64_t base = mix(seed ^ mix(index + 0x5851f42d4c957f2dull));
  for (size_t e = 0; e < cols * static_cast<size_t>(r); ++e) {
    uint64_t h = mix(base + 2 * e);
    double u1 = unit(h), u2 = unit(mix(base + 2 * e + 1));
    out[e] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

void add_error(const LowRankMatrix* mats, size_t n, const Target& t) {
  validate(mats, n, 1);
  dispatch(
      t, [&] { host::add_error(mats, n); }, [&] { cuda::add_error(mats, n, t.stream); });
}
void multiply_mq(const LowRankMatrix* mats, size_t n, int r, const Target& t) {
  validate(mats, n, r);
  dispatch(
      t, [&] { host::multiply_mq(mats, n, r); }, [&] { cuda::multiply_mq(mats, n, r, t.stream); });
}
void add_error_multiply_mq(const LowRankMatrix* mats, size_t n, int r, const Target& t) {
  validate(mats, n, r);
  dispatch(
      t, [&] { host::add_error_multiply_mq(mats, n, r); },
      [&] { cuda::add_error_multiply_mq(mats, n, r, t.stream); });
}
void orthogonalize(const LowRankMatrix* mats, size_t n, int r, float eps, const Target& t) {
  validate(mats, n, r);
  require(eps >= 0.0f && std::isfinite(eps), "eps must be a finite number >= 0, not ", eps);
  dispatch(
      t, [&] { host::orthogonalize(mats, n, r, eps); },
      [&] { cuda::orthogonalize(mats, n, r, eps, t.stream); });
}
void multiply_mtp(const LowRankMatrix* mats, size_t n, int r, const float* skip, const Target& t) {
  validate(mats, n, r);
  dispatch(
      t, [&] { host::multiply_mtp(mats, n, r, skip); },
      [&] { cuda::multiply_mtp(mats, n, r, skip, t.stream); });
}
void decompress(const LowRankMatrix* mats, size_t n, int r, float scale, const float* skip, const Target& t,
                const DecompressOutput& out) {
  validate(mats, n, r);
  dispatch(
      t, [&] { host::decompress(mats, n, r, scale, skip, out); },
      [&] { cuda::decompress(mats, n, r, scale, skip, out, t.stream); });
}

}  // namespace gradcomm::kernels::powersgd
