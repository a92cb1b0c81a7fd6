// The kernels layer's operations on the host (the host twins), against plain
// scalar references on random data: sizes 0, 1, 7, 4095, 65537, misaligned
// starts, mixed dtypes, thousands of tiny tensors, Inf/NaN at the first, a middle
// and the last element, and bad input (refused, nothing changed).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <functional>
#include "common/api_guard.hpp"
#include "common/device.hpp"
#include "kernels/ops.hpp"
#include "reference.hpp"

namespace gradcomm::kernels {
namespace {

using test::random_buffer;
using test::same_float;
using test::through;
using test::TypedBuffer;

const gcommDataType_t kDtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};
const size_t kSizes[] = {0, 1, 7, 4095, 65537};
const Target kHost{gcommHostDevice(), nullptr};
const float kInf = std::numeric_limits<float>::infinity();

std::vector<gcommTensor_t> tensors_of(std::vector<TypedBuffer>& bufs) {
  std::vector<gcommTensor_t> t;
  for (auto& b : bufs) t.push_back(b.tensor());
  return t;
}

// Runs f through the API's exception firewall; the message of the refusal.
std::string refused(const std::function<void()>& f) {
  EXPECT_EQ(api_call("op", f), gcommInvalidArgument);
  return last_error();
}

TEST(Unscale, MatchesTheReferenceForEverySizeDtypeAndAlignment) {
  std::mt19937 rng(10);
  for (auto d : kDtypes)
    for (size_t n : kSizes)
      for (size_t offset : {0, 1}) {
        TypedBuffer b = random_buffer(rng, d, n, offset);
        TypedBuffer before = b;
        gcommTensor_t t = b.tensor();
        float inv = 0.125f, found = 0.0f;
        unscale_and_check(&t, 1, &inv, &found, kHost);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.get(i), through(d, before.get(i) * inv)) << i;
        EXPECT_EQ(found, 0.0f);
      }
}

TEST(Unscale, FlagsInfAndNanAnywhereAndStillWritesThem) {
  std::mt19937 rng(11);
  for (auto d : kDtypes)
    for (size_t pos : {size_t{0}, size_t{2047}, size_t{4094}})
      for (float bad : {kInf, -kInf, std::nanf("")}) {
        TypedBuffer b = random_buffer(rng, d, 4095);
        b.set(pos, bad);
        gcommTensor_t t = b.tensor();
        float inv = 0.5f, found = 0.0f;
        unscale_and_check(&t, 1, &inv, &found, kHost);
        EXPECT_EQ(found, 1.0f) << "dtype " << d << " pos " << pos;
        EXPECT_TRUE(same_float(b.get(pos), bad * 0.5f));
      }
}

TEST(CheckFinite, FlagsInfAndNanAnywhereAndWritesNothing) {
  std::mt19937 rng(13);
  for (auto d : kDtypes)
    for (size_t n : kSizes)
      for (size_t offset : {0, 1}) {
        TypedBuffer b = random_buffer(rng, d, n, offset);
        const TypedBuffer before = b;
        gcommTensor_t t = b.tensor();
        float found = 0.0f;
        check_finite(&t, 1, &found, kHost);
        EXPECT_EQ(found, 0.0f) << "dtype " << d << " n " << n;
        for (size_t pos : {size_t{0}, n / 2, n - 1}) {
          if (n == 0) break;
          for (float bad : {kInf, -kInf, std::nanf("")}) {
            TypedBuffer c = before;
            c.set(pos, bad);
            const TypedBuffer with_bad = c;
            gcommTensor_t ct = c.tensor();
            found = 0.0f;
            check_finite(&ct, 1, &found, kHost);
            EXPECT_EQ(found, 1.0f) << "dtype " << d << " n " << n << " pos " << pos;
            ASSERT_EQ(c.bytes, with_bad.bytes);
          }
        }
        ASSERT_EQ(b.bytes, before.bytes);
      }
  float found = 0.0f;
  EXPECT_NE(refused([&] { check_finite(nullptr, 1, &found, kHost); }).find("'grads' is NULL"),
            std::string::npos);
  gcommTensor_t ok{&found, 1, gcommFloat32};
  EXPECT_NE(refused([&] { check_finite(&ok, 1, nullptr, kHost); }).find("'found_inf'"), std::string::npos);
}

TEST(Unscale, ThousandsOfTinyTensorsOfMixedDtypes) {
  std::mt19937 rng(12);
  std::vector<TypedBuffer> bufs, before;
  for (int k = 0; k < 3000; ++k) bufs.push_back(random_buffer(rng, kDtypes[k % 3], 1 + k % 17, k % 2));
  before = bufs;
  auto t = tensors_of(bufs);
  float inv = 2.0f, found = 0.0f;
  unscale_and_check(t.data(), t.size(), &inv, &found, kHost);
  for (size_t k = 0; k < bufs.size(); ++k)
    for (size_t i = 0; i < bufs[k].count; ++i)
      ASSERT_EQ(bufs[k].get(i), through(bufs[k].dtype, before[k].get(i) * inv));
  EXPECT_EQ(found, 0.0f);
}

TEST(Pack, GathersCastsAndScalesIntoEveryBucketDtype) {
  std::mt19937 rng(13);
  for (auto bucket_dtype : kDtypes) {
    std::vector<TypedBuffer> src;
    for (size_t k = 0; k < 6; ++k)
      src.push_back(random_buffer(rng, kDtypes[k % 3], kSizes[k % 5] + k, k % 2));
    auto t = tensors_of(src);
    std::vector<size_t> offsets;
    size_t next = 3;  // a gap before the first tensor, and padding between them
    for (auto& s : src) {
      offsets.push_back(next);
      next += s.count + 5;
    }
    TypedBuffer bucket = random_buffer(rng, bucket_dtype, next);
    TypedBuffer untouched = bucket;
    float device_scale = 4.0f;
    pack(t.data(), t.size(), offsets.data(), bucket.data(), bucket_dtype, 0.25f, &device_scale, kHost);
    for (size_t k = 0; k < src.size(); ++k)
      for (size_t i = 0; i < src[k].count; ++i)
        ASSERT_EQ(bucket.get(offsets[k] + i), through(bucket_dtype, src[k].get(i) * 1.0f)) << k << " " << i;
    EXPECT_EQ(bucket.get(0), untouched.get(0)) << "the gap must stay untouched";
    EXPECT_EQ(bucket.get(offsets[0] + src[0].count), untouched.get(offsets[0] + src[0].count));
  }
}

TEST(Pack, BackToBackWhenNoOffsets) {
  std::mt19937 rng(14);
  std::vector<TypedBuffer> src = {random_buffer(rng, gcommFloat32, 7), random_buffer(rng, gcommFloat32, 9)};
  auto t = tensors_of(src);
  TypedBuffer bucket = random_buffer(rng, gcommFloat16, 16);
  pack(t.data(), 2, nullptr, bucket.data(), gcommFloat16, 0.5f, nullptr, kHost);
  EXPECT_EQ(bucket.get(7), through(gcommFloat16, src[1].get(0) * 0.5f));
  EXPECT_EQ(bucket.get(15), through(gcommFloat16, src[1].get(8) * 0.5f));
}

// The pack names this rank's own non-finite gradients (the first non-finite
// gradient named, issue 47): Inf and NaN anywhere in a tensor (the middle, the
// tail past the host twin's 1024-element blocks); each flag at its tensor's
// slot, the finite ones left alone, a set flag never cleared; and a finite value
// that the f16 cast overflows (the wire carries Inf from this rank), not one that
// f32 holds.
TEST(Pack, FlagsEachTensorWhosePackedValueIsNonFinite) {
  std::mt19937 rng(15);
  const float inf = std::numeric_limits<float>::infinity();
  for (auto bucket_dtype : kDtypes) {
    std::vector<TypedBuffer> src;
    for (size_t k = 0; k < 5; ++k) src.push_back(random_buffer(rng, gcommFloat32, 1500 + 37 * k));
    src[1].set(700, inf);
    src[3].set(1500 + 37 * 3 - 1, std::nanf(""));  // the last element
    auto t = tensors_of(src);
    TypedBuffer bucket = random_buffer(rng, bucket_dtype, 8000);
    const size_t slots[] = {9, 7, 5, 3, 1};
    std::vector<float> flags(10, 0.0f);
    flags[9] = 1.0f;  // set before: stays set
    pack(t.data(), t.size(), nullptr, bucket.data(), bucket_dtype, 0.5f, nullptr, kHost, flags.data(), slots);
    EXPECT_EQ(flags, (std::vector<float>{0, 0, 0, 1, 0, 0, 0, 1, 0, 1})) << "bucket dtype " << bucket_dtype;
  }
  TypedBuffer big = random_buffer(rng, gcommFloat32, 3);
  big.set(1, 1e6f);
  gcommTensor_t bt = big.tensor();
  TypedBuffer wire16 = random_buffer(rng, gcommFloat16, 3), wire32 = random_buffer(rng, gcommFloat32, 3);
  float flag16 = 0, flag32 = 0;
  pack(&bt, 1, nullptr, wire16.data(), gcommFloat16, 1.0f, nullptr, kHost, &flag16);
  pack(&bt, 1, nullptr, wire32.data(), gcommFloat32, 1.0f, nullptr, kHost, &flag32);
  EXPECT_EQ(flag16, 1.0f);
  EXPECT_TRUE(std::isinf(wire16.get(1)));
  EXPECT_EQ(flag32, 0.0f);
  // Just below f16's overflow stays finite and unflagged; bf16 overflows past f32's
  // largest finite values only.
  big.set(1, 65504.0f);
  flag16 = 0;
  pack(&bt, 1, nullptr, wire16.data(), gcommFloat16, 1.0f, nullptr, kHost, &flag16);
  EXPECT_EQ(flag16, 0.0f);
  big.set(1, 3.4e38f);
  TypedBuffer wirebf = random_buffer(rng, gcommBfloat16, 3);
  float flagbf = 0;
  pack(&bt, 1, nullptr, wirebf.data(), gcommBfloat16, 1.0f, nullptr, kHost, &flagbf);
  EXPECT_EQ(flagbf, 1.0f);
  EXPECT_TRUE(std::isinf(wirebf.get(1)));
}

TEST(Unpack, FusedEpilogueCastsScalesAccumulatesAndFlags) {
  std::mt19937 rng(15);
  for (auto bucket_dtype : kDtypes)
    for (bool accumulate : {false, true}) {
      std::vector<TypedBuffer> dst;
      for (size_t k = 0; k < 5; ++k)
        dst.push_back(random_buffer(rng, kDtypes[(k + 1) % 3], kSizes[k], k % 2));
      std::vector<TypedBuffer> before = dst;
      auto t = tensors_of(dst);
      size_t total = 0;
      for (auto& d : dst) total += d.count;
      TypedBuffer bucket = random_buffer(rng, bucket_dtype, total);
      float device_scale = 0.5f, found = 0.0f;
      unpack(bucket.data(), bucket_dtype, nullptr, t.data(), t.size(), 0.25f, &device_scale, accumulate,
             &found, kHost);
      size_t off = 0;
      for (size_t k = 0; k < dst.size(); ++k) {
        for (size_t i = 0; i < dst[k].count; ++i) {
          float v = bucket.get(off + i) * (0.25f * 0.5f);
          if (accumulate) v = before[k].get(i) + v;
          ASSERT_EQ(dst[k].get(i), through(dst[k].dtype, v)) << k << " " << i;
        }
        off += dst[k].count;
      }
      EXPECT_EQ(found, 0.0f);
    }
}

TEST(Unpack, FlagsNonFiniteValuesFromTheBucketOrFromOverflowingCasts) {
  std::mt19937 rng(16);
  TypedBuffer bucket = random_buffer(rng, gcommFloat32, 65537);
  bucket.set(65536, std::nanf(""));
  TypedBuffer dst = random_buffer(rng, gcommFloat32, 65537);
  gcommTensor_t t = dst.tensor();
  float found = 0.0f;
  unpack(bucket.data(), gcommFloat32, nullptr, &t, 1, 1.0f, nullptr, false, &found, kHost);
  EXPECT_EQ(found, 1.0f);

  // 1e5 fits f32 but not f16: the cast overflows to Inf, which is flagged.
  TypedBuffer big = random_buffer(rng, gcommFloat32, 3);
  big.set(1, 1e5f);
  TypedBuffer half_dst = random_buffer(rng, gcommFloat16, 3);
  gcommTensor_t h = half_dst.tensor();
  found = 0.0f;
  unpack(big.data(), gcommFloat32, nullptr, &h, 1, 1.0f, nullptr, false, &found, kHost);
  EXPECT_EQ(found, 0.0f) << "the value itself is finite in f32; f16 overflow is documented as Inf";
  EXPECT_TRUE(std::isinf(half_dst.get(1)));
}

double ref_sq(TypedBuffer& b) {
  double s = 0;
  for (size_t i = 0; i < b.count; ++i) s += double(b.get(i)) * b.get(i);
  return s;
}

TEST(Norm, GlobalAndPerTensorMatchDoubleReferenceAndAreDeterministic) {
  std::mt19937 rng(17);
  std::vector<TypedBuffer> bufs;
  for (size_t k = 0; k < 9; ++k)
    bufs.push_back(random_buffer(rng, kDtypes[k % 3], kSizes[k % 5] * 3 + k, k % 2));
  auto t = tensors_of(bufs);
  float global = 0, again = 0;
  std::vector<float> per(t.size()), per_again(t.size());
  l2_norm(t.data(), t.size(), &global, per.data(), nullptr, 0, kHost);
  l2_norm(t.data(), t.size(), &again, per_again.data(), nullptr, 0, kHost);
  double total = 0;
  for (size_t k = 0; k < bufs.size(); ++k) {
    double sq = ref_sq(bufs[k]);
    total += sq;
    EXPECT_NEAR(per[k], std::sqrt(sq), 1e-6 * std::sqrt(sq) + 1e-30) << k;
    EXPECT_EQ(per[k], per_again[k]);
  }
  EXPECT_NEAR(global, std::sqrt(total), 1e-6 * std::sqrt(total));
  EXPECT_EQ(global, again);
}

TEST(Norm, ClipScalesOnlyWhenAboveTheMaximum) {
  std::mt19937 rng(18);
  for (float max_norm : {1.0f, 1e6f}) {
    std::vector<TypedBuffer> bufs = {random_buffer(rng, gcommFloat32, 4095),
                                     random_buffer(rng, gcommBfloat16, 7)};
    std::vector<TypedBuffer> before = bufs;
    auto t = tensors_of(bufs);
    float norm = 0;
    clip_by_global_norm(t.data(), t.size(), max_norm, &norm, nullptr, 0, kHost);
    double ref = std::sqrt(ref_sq(before[0]) + ref_sq(before[1]));
    EXPECT_NEAR(norm, ref, 1e-5 * ref);
    float factor = max_norm / (norm + 1e-6f);
    if (factor > 1) factor = 1;
    for (size_t k = 0; k < 2; ++k)
      for (size_t i = 0; i < bufs[k].count; ++i)
        ASSERT_EQ(bufs[k].get(i), through(bufs[k].dtype, before[k].get(i) * factor));
  }
}

// The flagged copy that state updates use (PowerSGD's Q, the quantized wires' error
// feedback): copies unless the skip flag is set; NULL flag means copy.
TEST(CopyUnlessFlagged, CopiesUnlessTheFlagIsSet) {
  std::vector<float> src = {1.5f, -2.0f, 3.25f}, dst(3, 0.0f);
  const float set = 1.0f, clear = 0.0f;
  copy_unless_flagged(dst.data(), src.data(), 3, &set, kHost);
  EXPECT_EQ(dst, std::vector<float>(3, 0.0f));
  copy_unless_flagged(dst.data(), src.data(), 3, &clear, kHost);
  EXPECT_EQ(dst, src);
  std::vector<float> other(3, 9.0f);
  copy_unless_flagged(other.data(), src.data(), 3, nullptr, kHost);
  EXPECT_EQ(other, src);
  EXPECT_THROW(copy_unless_flagged(nullptr, src.data(), 3, nullptr, kHost), Error);
  copy_unless_flagged(nullptr, nullptr, 0, nullptr, kHost);  // nothing to copy: nothing read
}

// Issue 17 #12: Inf or NaN in the list gives an Inf/NaN norm and changes no
// value (an Inf used to give a factor of 0: finite values zeroed, Inf made NaN),
// and the checked variant raises found_inf; a finite list leaves it alone.
TEST(Norm, ANonFiniteListIsLeftAsItWasAndReported) {
  std::mt19937 rng(21);
  for (float bad : {kInf, -kInf, std::nanf("")}) {
    std::vector<TypedBuffer> bufs = {random_buffer(rng, gcommFloat32, 353),
                                     random_buffer(rng, gcommFloat16, 9)};
    bufs[0].set(17, bad);
    std::vector<TypedBuffer> before = bufs;
    auto t = tensors_of(bufs);
    float norm = 0, found = 0;
    clip_by_global_norm(t.data(), t.size(), 1e-3f, &norm, nullptr, 0, kHost, &found);
    EXPECT_FALSE(std::isfinite(norm)) << bad;
    EXPECT_EQ(found, 1.0f) << bad;
    for (size_t k = 0; k < 2; ++k)
      EXPECT_EQ(bufs[k].bytes, before[k].bytes) << "tensor " << k << " changed, bad " << bad;
  }
  std::vector<TypedBuffer> fine = {random_buffer(rng, gcommFloat32, 100)};
  auto t = tensors_of(fine);
  float norm = 0, found = 0;
  clip_by_global_norm(t.data(), t.size(), 1e-3f, &norm, nullptr, 0, kHost, &found);
  EXPECT_EQ(found, 0.0f);
  EXPECT_TRUE(std::isfinite(norm));
}

TEST(Cast, EveryPairOfDtypes) {
  std::mt19937 rng(19);
  for (auto from : kDtypes)
    for (auto to : kDtypes) {
      TypedBuffer src = random_buffer(rng, from, 4095, 1, 70000.0f);
      TypedBuffer dst = random_buffer(rng, to, 4095);
      cast(src.data(), from, dst.data(), to, 4095, kHost);
      for (size_t i = 0; i < 4095; ++i) ASSERT_TRUE(same_float(dst.get(i), through(to, src.get(i)))) << i;
    }
}

// ---- bad input: refused with a message, nothing changed ----

TEST(BadInput, NullDataWithElementsOrNullScalars) {
  gcommTensor_t t{nullptr, 5, gcommFloat32};
  float inv = 1, found = 0;
  EXPECT_NE(refused([&] {
              unscale_and_check(&t, 1, &inv, &found, kHost);
            }).find("grads[0] has 5 elements but its data is NULL"),
            std::string::npos);
  std::vector<float> x(4, 1.0f);
  gcommTensor_t ok{x.data(), 4, gcommFloat32};
  EXPECT_NE(refused([&] { unscale_and_check(&ok, 1, nullptr, &found, kHost); }).find("'inv_scale'"),
            std::string::npos);
  EXPECT_NE(refused([&] { unscale_and_check(nullptr, 2, &inv, &found, kHost); }).find("'grads' is NULL"),
            std::string::npos);
  EXPECT_EQ(x[0], 1.0f);
}

TEST(BadInput, InvalidDtypesAndOverflowingCounts) {
  std::vector<float> x(4, 1.0f);
  gcommTensor_t bad{x.data(), 4, static_cast<gcommDataType_t>(5)};
  float inv = 2, found = 0;
  EXPECT_NE(refused([&] { unscale_and_check(&bad, 1, &inv, &found, kHost); }).find("grads[0].dtype"),
            std::string::npos);
  gcommTensor_t huge{x.data(), SIZE_MAX / 2, gcommFloat32};
  EXPECT_NE(refused([&] { unscale_and_check(&huge, 1, &inv, &found, kHost); }).find("overflow"),
            std::string::npos);
  gcommTensor_t t{x.data(), 4, gcommFloat32};
  refused([&] { pack(&t, 1, nullptr, x.data(), static_cast<gcommDataType_t>(-1), 1.0f, nullptr, kHost); });
  EXPECT_EQ(x[0], 1.0f);
}

TEST(BadInput, OverlappingDestinationsAndBucketRanges) {
  std::vector<float> x(16, 1.0f), bucket(32, 3.0f);
  gcommTensor_t dst[2] = {{x.data(), 8, gcommFloat32}, {x.data() + 4, 8, gcommFloat32}};
  float found = 0;
  EXPECT_NE(refused([&] {
              unpack(bucket.data(), gcommFloat32, nullptr, dst, 2, 1.0f, nullptr, false, &found, kHost);
            }).find("overlap"),
            std::string::npos);
  EXPECT_EQ(x[0], 1.0f) << "nothing may run";
  // Out of address order (the check sorts only then), with the overlap not between
  // neighbours in the list.
  gcommTensor_t shuffled[3] = {
      {x.data() + 12, 4, gcommFloat32}, {x.data(), 4, gcommFloat32}, {x.data() + 10, 3, gcommFloat32}};
  EXPECT_NE(refused([&] {
              unpack(bucket.data(), gcommFloat32, nullptr, shuffled, 3, 1.0f, nullptr, false, &found, kHost);
            }).find("tensors 2 and 0 overlap"),
            std::string::npos)
      << last_error();
  gcommTensor_t shuffled_ok[3] = {
      {x.data() + 12, 4, gcommFloat32}, {x.data(), 4, gcommFloat32}, {x.data() + 4, 8, gcommFloat32}};
  EXPECT_NO_THROW(
      unpack(bucket.data(), gcommFloat32, nullptr, shuffled_ok, 3, 1.0f, nullptr, false, &found, kHost));
  gcommTensor_t src[2] = {{x.data(), 8, gcommFloat32}, {x.data() + 8, 8, gcommFloat32}};
  size_t offsets[2] = {0, 4};
  EXPECT_NE(refused([&] {
              pack(src, 2, offsets, bucket.data(), gcommFloat32, 1.0f, nullptr, kHost);
            }).find("bucket offsets"),
            std::string::npos);
  EXPECT_EQ(bucket[0], 3.0f);
}

TEST(BadInput, CudaTargetWithoutAGpu) {
  if (gpu_available()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_NE(refused([&] { make_target(gcommCudaDevice(0), nullptr); }).find("no usable GPU"),
            std::string::npos);
}

TEST(BadInput, ClipNeedsAPositiveFiniteMaximum) {
  std::vector<float> x(4, 1.0f);
  gcommTensor_t t{x.data(), 4, gcommFloat32};
  float norm = 0;
  for (float m : {0.0f, -1.0f, kInf, std::nanf("")})
    refused([&] { clip_by_global_norm(&t, 1, m, &norm, nullptr, 0, kHost); });
  // The tensor list is checked before anything reads it.
  EXPECT_NE(refused([&] {
              clip_by_global_norm(nullptr, 3, 1.0f, &norm, nullptr, 0, kHost);
            }).find("'tensors' is NULL"),
            std::string::npos);
  gcommTensor_t huge{x.data(), SIZE_MAX / 2, gcommFloat32};
  EXPECT_NE(refused([&] { clip_by_global_norm(&huge, 1, 1.0f, &norm, nullptr, 0, kHost); }).find("overflow"),
            std::string::npos);
  EXPECT_EQ(x[0], 1.0f);
}

TEST(Empty, EmptyListsAndEmptyTensorsAreFine) {
  float inv = 1, found = 0, norm = -1;
  unscale_and_check(nullptr, 0, &inv, &found, kHost);
  gcommTensor_t empty{nullptr, 0, gcommBfloat16};
  unscale_and_check(&empty, 1, &inv, &found, kHost);
  pack(&empty, 1, nullptr, nullptr, gcommFloat16, 1.0f, nullptr, kHost);
  l2_norm(&empty, 1, &norm, nullptr, nullptr, 0, kHost);
  EXPECT_EQ(norm, 0.0f);
  EXPECT_EQ(found, 0.0f);
}

}  // namespace
}  // namespace gradcomm::kernels
