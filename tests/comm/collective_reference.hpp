// The contract every transport's collectives meet, on the host: random inputs
// (optionally with Inf and NaN), and what each rank's output must hold (ranks
// combined in rank order in float, rounded once: kernels/reduce/reduce_math.hpp).
// The conformance suite checks the host transports against it, and the cuda-ipc
// transport's processes check themselves against it on a GPU (cuda_ipc/).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../kernels/reference.hpp"
#include "collective_calls.hpp"

namespace gradcomm::test {

inline const gcommDataType_t kDtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};

// Rank r's input: random values of the dtype in [-8, 8), never zero; with
// `specials`, about one in 97 is Inf, -Inf or NaN.
inline TypedBuffer input(gcommDataType_t d, size_t count, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  TypedBuffer b = random_buffer(rng, d, count, 0, 8.0f);
  if (specials)
    for (size_t i = 0; i < count; ++i)
      if (rng() % 97 == 0) {
        const uint32_t k = rng() % 3;
        b.set(i, k == 0   ? std::numeric_limits<float>::infinity()
                 : k == 1 ? -std::numeric_limits<float>::infinity()
                          : std::nanf(""));
      }
  return b;
}

// The contract's reduction of element i over the ranks' values.
inline float reduced(gcommRedOp_t op, gcommDataType_t d, const std::vector<float>& values) {
  float acc = values[0];
  for (size_t q = 1; q < values.size(); ++q) {
    const float v = values[q];
    if (op == gcommMax || op == gcommMin) {
      const bool nan = std::isnan(acc) || std::isnan(v);
      acc = nan ? acc + v : op == gcommMax ? std::max(acc, v) : std::min(acc, v);
    } else {
      acc = acc + v;
    }
  }
  if (op == gcommAvg) acc /= static_cast<float>(values.size());
  return through(d, acc);
}

// What rank r's output must hold: recv_elems values.
inline std::vector<float> expected(Op op, gcommRedOp_t redop, gcommDataType_t d, size_t count, int root,
                                   int r, const std::vector<TypedBuffer>& in) {
  const int n = static_cast<int>(in.size());
  auto column = [&](size_t i) {
    std::vector<float> v;
    for (int q = 0; q < n; ++q) v.push_back(in[q].get(i));
    return v;
  };
  std::vector<float> out;
  switch (op) {
    case Op::kAllReduce:
    case Op::kReduce:
      for (size_t i = 0; i < count; ++i) out.push_back(reduced(redop, d, column(i)));
      break;
    case Op::kReduceScatter:
      for (size_t i = 0; i < count; ++i) out.push_back(reduced(redop, d, column(r * count + i)));
      break;
    case Op::kBroadcast:
      for (size_t i = 0; i < count; ++i) out.push_back(in[root].get(i));
      break;
    case Op::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) out.push_back(in[q].get(i));
      break;
    case Op::kAllToAll:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) out.push_back(in[q].get(r * count + i));
      break;
  }
  return out;
}

}  // namespace gradcomm::test
