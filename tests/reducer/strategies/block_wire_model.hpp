// What the block-quantized wires' tests share (block_wire.*: int8, fp8, fp4): the
// algorithm in one process for a codec (the result every rank must get, E and E2
// kept as the strategy keeps them), a rank's reducer over f32 gradients with one
// gradient per bucket, and random gradients.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant/int8.hpp"
#include "reducer/where_rig.hpp"

namespace gradcomm::test {

namespace kq = kernels::quant;
inline const kernels::Target kHostTarget{gcommHostDevice(), nullptr};

// The algorithm in one process for a bucket holding one f32 gradient: W ranks'
// gradients in, the result every rank must get out; E and E2 kept as the strategy does.
struct Model {
  const kernels::quant::Codec& codec;  // the wire's format
  size_t world, n, block;
  bool error_feedback;
  std::vector<std::vector<float>> e;   // per rank, n
  std::vector<std::vector<float>> e2;  // per owner, chunk_elements

  Model(size_t w, size_t count, size_t b, bool ef,
        const kernels::quant::Codec& c = kernels::quant::int8_codec())
      : codec(c), world(w), n(count), block(b), error_feedback(ef) {
    const kq::Layout l = kq::layout_for(n, w, b, c.code_bits);
    e.assign(w, std::vector<float>(n, 0.0f));
    e2.assign(w, std::vector<float>(l.chunk_elements(), 0.0f));
  }

  // Returns the averaged result; *skipped when it holds Inf/NaN (E, E2 kept then).
  std::vector<float> step(const std::vector<std::vector<float>>& g, bool* skipped) {
    const kq::Layout l = kq::layout_for(n, world, block, codec.code_bits);
    const float inv_world = 1.0f / static_cast<float>(world);
    std::vector<std::vector<uint8_t>> q(world, std::vector<uint8_t>(l.total_bytes()));
    std::vector<std::vector<float>> residual(world, std::vector<float>(n));
    for (size_t r = 0; r < world; ++r) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = g[r][i] * inv_world;  // the pack's average
      kq::quantize(codec, x.data(), error_feedback ? e[r].data() : nullptr, l, q[r].data(),
                   error_feedback ? residual[r].data() : nullptr, kHostTarget);
    }
    std::vector<uint8_t> gathered(l.total_bytes());
    std::vector<std::vector<float>> r2(world, std::vector<float>(l.chunk_elements()));
    for (size_t owner = 0; owner < world; ++owner) {
      std::vector<uint8_t> in(world * l.chunk_bytes());
      for (size_t r = 0; r < world; ++r)
        std::memcpy(in.data() + r * l.chunk_bytes(), q[r].data() + owner * l.chunk_bytes(), l.chunk_bytes());
      kq::sum_requantize(codec, in.data(), world, l, error_feedback ? e2[owner].data() : nullptr,
                         gathered.data() + owner * l.chunk_bytes(),
                         error_feedback ? r2[owner].data() : nullptr, kHostTarget);
    }
    std::vector<float> out(n);
    kq::dequantize(codec, gathered.data(), l, out.data(), kHostTarget);
    *skipped = false;
    for (float v : out) *skipped = *skipped || !std::isfinite(v);
    if (!*skipped && error_feedback) {
      e = residual;
      e2 = r2;
    }
    return out;
  }
};

// The strategy's rule: a bucket is quantized when its W chunks take fewer bytes than f32.
inline bool is_quantized(size_t n, size_t world, size_t block, size_t code_bits = 8) {
  return world * kq::layout_for(n, world, block, code_bits).chunk_bytes() < 4 * n;
}

// One gradient per bucket (the model's unit), f32, no rebuild.
inline gcommReducerConfig_t one_grad_per_bucket() {
  gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.bucket_cap_bytes = 4;
  c.first_bucket_bytes = 4;
  c.rebuild_buckets = 0;
  return c;
}

// A rank's reducer over f32 gradients of `sizes`.
struct RankReducer {
  std::vector<GradMem> mem;
  gcommReducer_t r = nullptr;
  bool gpu;

  RankReducer(gcommComm_t comm, const std::vector<size_t>& sizes, bool on_gpu, const gcommReducerConfig_t& c,
              std::string* error)
      : gpu(on_gpu) {
    std::vector<gcommTensor_t> tensors;
    for (size_t n : sizes) {
      mem.emplace_back(gcommFloat32, n, gpu);
      tensors.push_back(mem.back().tensor());
    }
    *error = check(gcommReducerCreate(comm, tensors.data(), tensors.size(), &c, &r), "gcommReducerCreate");
  }
  ~RankReducer() {
    if (r != nullptr) gcommReducerDestroy(r);
  }
  // One synced step with these gradients (marked in backward order); *out: them after.
  std::string step(const std::vector<std::vector<float>>& grads, cudaStream_t stream,
                   std::vector<std::vector<float>>* out, int* skip = nullptr) {
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    for (size_t k = grads.size(); k-- > 0;) {
      TypedBuffer b{gcommFloat32, grads[k].size(), 0, std::vector<unsigned char>((grads[k].size() + 8) * 4)};
      std::memcpy(b.bytes.data(), grads[k].data(), grads[k].size() * 4);
      mem[k].upload(b, stream);
      RIG_CHECK(gcommReducerMarkReady(r, k, stream));
    }
    int s = 0;
    RIG_CHECK(gcommReducerFinalize(r, stream, &s));
    if (skip != nullptr) *skip = s;
    out->clear();
    for (size_t k = 0; k < grads.size(); ++k) {
      TypedBuffer b = mem[k].download(stream);
      out->emplace_back(grads[k].size());
      std::memcpy(out->back().data(), b.bytes.data(), grads[k].size() * 4);
    }
    return "";
  }
};

inline std::vector<float> randoms(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng) * (1.0f + static_cast<float>(seed % 7));
  return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A reducer's compression state, saved.
inline std::string saved_state(gcommReducer_t r, std::vector<uint8_t>* s) {
  size_t need = 0;
  RIG_CHECK(gcommReducerSaveCompressionState(r, nullptr, 0, &need));
  s->resize(need);
  RIG_CHECK(gcommReducerSaveCompressionState(r, s->data(), s->size(), &need));
  return "";
}

// "" when a call returned `want` with `needle` in its message, else what it did.
inline std::string refused(gcommStatus_t got, gcommStatus_t want, const char* needle) {
  if (got == want && std::string(gcommGetLastError()).find(needle) != std::string::npos) return "";
  return std::string("expected '") + needle + "', got " + gcommGetStatusString(got) + ": " +
         gcommGetLastError();
}

// Random gradients, inputs[step][rank][grad], different for every step, rank and gradient.
using StepInputs = std::vector<std::vector<std::vector<std::vector<float>>>>;
inline StepInputs random_inputs(int steps, int world, const std::vector<size_t>& sizes) {
  StepInputs inputs(steps);
  for (int t = 0; t < steps; ++t)
    for (int r = 0; r < world; ++r) {
      inputs[t].emplace_back();
      for (size_t k = 0; k < sizes.size(); ++k)
        inputs[t][r].push_back(randoms(sizes[k], static_cast<unsigned>(1000 * t + 100 * r + k)));
    }
  return inputs;
}

// The model's result for every gradient (one per bucket) from step `start` on:
// expected[step][grad] (empty before `start`); with error feedback, blocks of `block`.
inline std::vector<std::vector<std::vector<float>>> model_results(const kernels::quant::Codec& codec,
                                                                  int world, const std::vector<size_t>& sizes,
                                                                  size_t block, const StepInputs& inputs,
                                                                  int start = 0) {
  std::vector<std::vector<std::vector<float>>> expected(inputs.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    Model m(static_cast<size_t>(world), sizes[k], block, true, codec);
    for (size_t t = static_cast<size_t>(start); t < inputs.size(); ++t) {
      std::vector<std::vector<float>> g;
      for (int r = 0; r < world; ++r) g.push_back(inputs[t][r][k]);
      bool skipped = false;
      expected[t].push_back(m.step(g, &skipped));
    }
  }
  return expected;
}

}  // namespace gradcomm::test
