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

inline std::vector<size_t> resnet50_sizes() {
  std::vector<size_t> s;
  auto conv = [&](size_t in, size_t out, size_t k) { s.push_back(in * out * k * k); };
  auto bn = [&](size_t c) {
    s.push_back(c);
    s.push_back(c);
  };
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
  s.push_back(2048 * 1000);
  s.push_back(1000);
  return s;
}

inline std::vector<size_t> gpt2_medium_sizes() {
  const size_t d = 1024;
  std::vector<size_t> s = {50257 * d, 1024 * d};
  for (int layer = 0; layer < 24; ++layer) {
    for (size_t n : {d, d, d * 3 * d, 3 * d, d * d, d, d, d, d * 4 * d, 4 * d, 4 * d * d, d}) s.push_back(n);
  }
  s.push_back(d);
  s.push_back(d);
  return s;
}

inline std::vector<size_t> tiny_sizes() {
  std::vector<size_t> s;
  for (size_t k = 0; k < 5000; ++k) s.push_back(64 + (k * 37) % 128);
  return s;
}

inline std::vector<size_t> grad_set(const std::string& name) {
  if (name == "resnet50") return resnet50_sizes();
  if (name == "gpt2_medium") return gpt2_medium_sizes();
  return tiny_sizes();
}

// The first dimension of each tensor of a set (0 for vectors), in the same order
// as grad_set(): conv weights are out x (in k k), linear weights as PyTorch holds
// them (GPT-2's Conv1D: in x out), embeddings vocab x d. PowerSGD views each
// gradient as rows x (count / rows).
inline std::vector<size_t> grad_rows(const std::string& name) {
  std::vector<size_t> rows;
  if (name == "resnet50") {
    auto conv = [&](size_t, size_t out, size_t) { rows.push_back(out); };
    auto bn = [&](size_t) { rows.insert(rows.end(), {0, 0}); };
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
    rows.insert(rows.end(), {1000, 0});
  } else if (name == "gpt2_medium") {
    const size_t d = 1024;
    rows = {50257, 1024};
    for (int layer = 0; layer < 24; ++layer)
      for (size_t r : {size_t{0}, size_t{0}, d, size_t{0}, d, size_t{0}, size_t{0}, size_t{0}, d, size_t{0}, 4 * d,
                       size_t{0}})
        rows.push_back(r);
    rows.insert(rows.end(), {0, 0});
  } else {
    rows.assign(grad_set(name).size(), 0);
  }
  return rows;
}

// A deterministic gradient value with low-rank structure plus a little noise,
// computed the same way by the PyTorch peers (bench/comm/torch_powersgd_peer.py).
inline float lowrank_value(size_t tensor, size_t i, size_t j) {
  float v = 0.0f;
  for (int c = 1; c <= 4; ++c)
    v += std::sin(0.37f * c * static_cast<float>(i + 1 + tensor)) * std::cos(0.23f * c * static_cast<float>(j + 1)) / c;
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
