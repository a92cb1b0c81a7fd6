// Gradient sets shaped like real models (element counts per tensor, in
// registration order), shared by the benchmarks:
//  - resnet50: 161 tensors, ~25.6 M parameters (conv weights, BN scale/shift, fc);
//  - gpt2_medium: 292 tensors, ~355 M parameters (embeddings, 24 blocks, final LN);
//  - tiny: 5,000 tensors of 64..191 elements (launch-bound).
#pragma once

#include <cstddef>
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

inline size_t total_elements(const std::vector<size_t>& sizes) {
  size_t t = 0;
  for (size_t n : sizes) t += n;
  return t;
}

}  // namespace gradcomm::bench
