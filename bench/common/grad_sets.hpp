// Gradient sets shaped like real models (element counts per tensor, in
// registration order), shared by the benchmarks:
//  - resnet50: 161 tensors, ~25.6 M parameters (conv weights, BN scale/shift, fc);
//  - gpt2_medium: 292 tensors, ~355 M parameters (embeddings, 24 blocks, final LN);
//  - tiny: 5,000 tensors of 64..191 elements (launch-bound).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gradcomm::bench {

// One tensor of a set: its element count and its first dimension (0 for vectors;
// PowerSGD views a gradient as rows x (count / rows)). Conv weights are
// out x (in k k); GPT-2's linear weights are held as PyTorch's Conv1D holds them
// (in x out); embeddings vocab x d.
struct GradShape {
  size_t count;
  size_t rows;
};

inline std::vector<GradShape> resnet50_shapes() {
  std::vector<GradShape> s;
  auto conv = [&](size_t in, size_t out, size_t k) { s.push_back({in * out * k * k, out}); };
  auto bn = [&](size_t c) { s.insert(s.end(), {{c, 0}, {c, 0}}); };
  conv(3, 64, 7);
  bn(64);
  size_t in = 64;
  const size_t mids[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    size_t mid = mids[stage], out = mid * 4;
    for (size_t b = 0; b < blocks[stage]; ++b) {
      conv(in, mid, 1);
      bn(mid);
      conv(mid, mid, 3);
      bn(mid);
      conv(mid, out, 1);
      bn(out);
      if (b == 0) {
        conv(in, out, 1);
        bn(out);
      }
      in = out;
    }
  }
  s.insert(s.end(), {{2048 * 1000, 1000}, {1000, 0}});
  return s;
}

inline std::vector<GradShape> gpt2_medium_shapes() {
  const size_t d = 1024;
  std::vector<GradShape> s = {{50257 * d, 50257}, {1024 * d, 1024}};
  for (int layer = 0; layer < 24; ++layer)
    s.insert(s.end(), {{d, 0},
                       {d, 0},
                       {d * 3 * d, d},
                       {3 * d, 0},
                       {d * d, d},
                       {d, 0},
                       {d, 0},
                       {d, 0},
                       {d * 4 * d, d},
                       {4 * d, 0},
                       {4 * d * d, 4 * d},
                       {d, 0}});
  s.insert(s.end(), {{d, 0}, {d, 0}});
  return s;
}

inline std::vector<GradShape> tiny_shapes() {
  std::vector<GradShape> s;
  for (size_t k = 0; k < 5000; ++k) s.push_back({64 + (k * 37) % 128, 0});
  return s;
}

inline std::vector<GradShape> grad_shapes(const std::string& name) {
  if (name == "resnet50") return resnet50_shapes();
  if (name == "gpt2_medium") return gpt2_medium_shapes();
  return tiny_shapes();
}

// Element counts per tensor, in registration order.
inline std::vector<size_t> grad_set(const std::string& name) {
  std::vector<size_t> counts;
  for (const GradShape& g : grad_shapes(name)) counts.push_back(g.count);
  return counts;
}

// First dimensions per tensor (0 for vectors), in the same order.
inline std::vector<size_t> grad_rows(const std::string& name) {
  std::vector<size_t> rows;
  for (const GradShape& g : grad_shapes(name)) rows.push_back(g.rows);
  return rows;
}

// A deterministic gradient value with low-rank structure plus a little noise,
// computed the same way by the PyTorch peers (bench/comm/torch_powersgd_peer.py).
inline float lowrank_value(size_t tensor, size_t i, size_t j) {
  float v = 0.0f;
  for (int c = 1; c <= 4; ++c)
    v += std::sin(0.37f * c * static_cast<float>(i + 1 + tensor)) *
         std::cos(0.23f * c * static_cast<float>(j + 1)) / c;
  uint32_t h = static_cast<uint32_t>(i * 73856093u) ^ static_cast<uint32_t>(j * 19349663u) ^
               static_cast<uint32_t>(tensor * 83492791u);
  h ^= h >> 16;
  h *= 0x45d9f3bu;
  h ^= h >> 16;
  return v + 0.05f * (static_cast<float>(h) / 4294967296.0f * 2.0f - 1.0f);
}

inline size_t total_elements(const std::vector<size_t>& sizes) {
  size_t t = 0;
  for (size_t n : sizes) t += n;
  return t;
}

}  // namespace gradcomm::bench
