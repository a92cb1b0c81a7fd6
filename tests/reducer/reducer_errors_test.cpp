// The reducer's error paths: unused gradients (as zero, or an error that leaves
// the other ranks unharmed), calls in the wrong order, bad configuration and
// handles. Each error leaves the reducer usable.
#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {
namespace {

using ReducerErrors = ReducerRig;

bool message_has(const char* needle) {
  return std::string(gcommGetLastError()).find(needle) != std::string::npos;
}

// Rank 1 never marks gradient 2. As zero: every rank gets (rank 0's + 0) / 2 for it.
// As an error: rank 1 fails naming index 2 after completing the step the same way
// (so its gradients match rank 0's), rank 0 completes, and the next step works.
TEST_P(ReducerErrors, UnusedGradientsAsZeroOrAsAnErrorThatDoesNotHangThePeers) {
  for (int mode : {static_cast<int>(gcommUnusedAsZero), static_cast<int>(gcommUnusedError)}) {
    auto comms = make_comms(2);
    bool on_gpu = gpu();
    run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::vector<GradMem> mem;
      std::vector<gcommTensor_t> tensors;
      for (size_t count : {100, 200, 300, 400}) {
        mem.emplace_back(gcommFloat32, count, on_gpu);
        tensors.push_back(mem.back().tensor());
      }
      gcommReducerConfig_t cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
      cfg.unused_grads = mode;
      cfg.bucket_cap_bytes = 1024;  // one gradient per bucket
      gcommReducer_t r = nullptr;
      RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &cfg, &r));
      std::vector<TypedBuffer> ones;
      for (auto& m : mem) {
        TypedBuffer b{gcommFloat32, m.count, 0, std::vector<unsigned char>((m.count + 8) * 4)};
        for (size_t j = 0; j < b.count; ++j) b.set(j, rank == 0 ? 2.0f : 4.0f);
        m.upload(b, stream);
        ones.push_back(b);
      }
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i = 0; i < 4; ++i)
        if (!(rank == 1 && i == 2)) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      gcommStatus_t s = gcommReducerFinalize(r, stream, nullptr);
      if (mode == gcommUnusedAsZero) {
        RIG_CHECK(s);
        TypedBuffer g2 = mem[2].download(stream);
        if (g2.get(7) != 1.0f)
          return "unused-as-zero gradient is " + std::to_string(g2.get(7)) + ", not (2+0)/2";
        TypedBuffer g1 = mem[1].download(stream);
        if (g1.get(7) != 3.0f) return "used gradient is " + std::to_string(g1.get(7)) + ", not 3";
      } else if (rank == 1) {
        if (s != gcommInvalidState) return "an unused gradient was not reported";
        if (!message_has("1 of 4 gradients were never marked ready in this step: 2"))
          return gcommGetLastError();
        TypedBuffer g1 = mem[1].download(stream);
        if (g1.get(7) != 3.0f)
          return "a refused step left rank 1's used gradient at " + std::to_string(g1.get(7)) +
                 ", not rank 0's 3";
        TypedBuffer g2 = mem[2].download(stream);
        if (g2.get(7) != 1.0f)
          return "a refused step left the unused gradient at " + std::to_string(g2.get(7)) +
                 ", not rank 0's (2+0)/2";
      } else {
        RIG_CHECK(s);  // rank 0 did its part and completes
      }
      // The next step works on every rank.
      for (size_t i = 0; i < 4; ++i) mem[i].upload(ones[i], stream);
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i = 0; i < 4; ++i) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      TypedBuffer g3 = mem[3].download(stream);
      if (g3.get(0) != 3.0f) return "the step after the error is wrong: " + std::to_string(g3.get(0));
      RIG_CHECK(gcommReducerDestroy(r));
      return "";
    });
  }
}

// Every call-order mistake is refused before anything is launched, and a proper
// step afterwards gives the right result.
TEST_P(ReducerErrors, CallsInTheWrongOrderAreRefusedAndChangeNothing) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    GradMem a(gcommFloat32, 64, on_gpu), b(gcommFloat16, 33, on_gpu);
    gcommTensor_t t[2] = {a.tensor(), b.tensor()};
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, t, 2, nullptr, &r));
    auto expect = [&](gcommStatus_t got, gcommStatus_t want, const char* needle) -> std::string {
      if (got != want) return std::string("status ") + gcommGetStatusString(got) + " for '" + needle + "'";
      if (!message_has(needle))
        return std::string("message '") + gcommGetLastError() + "' lacks '" + needle + "'";
      return "";
    };
    std::string e;
    if (!(e = expect(gcommReducerMarkReady(r, 0, stream), gcommInvalidState, "outside a step")).empty())
      return e;
    if (!(e = expect(gcommReducerFinalize(r, stream, nullptr), gcommInvalidState, "without a step")).empty())
      return e;
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    if (!(e = expect(gcommReducerBeginStep(r, 1), gcommInvalidState, "already in progress")).empty())
      return e;
    if (!(e = expect(gcommReducerMarkReady(r, 2, stream), gcommInvalidArgument, "out of range")).empty())
      return e;
    RIG_CHECK(gcommReducerMarkReady(r, 1, stream));
    if (!(e = expect(gcommReducerMarkReady(r, 1, stream), gcommInvalidState, "already marked")).empty())
      return e;
    if (!(e = expect(gcommReducerSetGradData(r, 0, a.data), gcommInvalidState, "during a step")).empty())
      return e;
    if (!(e = expect(gcommReducerBeginStep(r, 2), gcommInvalidArgument, "sync must be 0 or 1")).empty())
      return e;
    std::mt19937 rng(3);
    TypedBuffer va = random_buffer(rng, gcommFloat32, 64);
    a.upload(va, stream);
    RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    TypedBuffer got = a.download(stream);
    for (size_t j = 0; j < 64; ++j)
      if (got.get(j) != va.get(j)) return "one rank's average is not its own gradient";
    RIG_CHECK(gcommReducerSetGradData(r, 0, a.data));  // between steps: fine
    if (!(e = expect(gcommReducerSetGradData(r, 0, nullptr), gcommInvalidArgument, "NULL")).empty()) return e;
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

// Issue 17 #3: gradients sharing memory (identical, partly overlapping, an f32
// and an f16 view of the same bytes) used to be accepted at create and by
// SetGradData, and only caught at the next mark-ready, which failed the reducer
// for good. They are refused at once, naming both indices; the reducer stays usable.
TEST_P(ReducerErrors, OverlappingGradientsAreRefusedAtRegistrationNamingBoth) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    GradMem slab(gcommFloat32, 256, on_gpu);
    float* base = static_cast<float*>(slab.data);
    auto t = [&](size_t at, size_t n, gcommDataType_t d = gcommFloat32) {
      return gcommTensor_t{reinterpret_cast<char*>(base) + at * 4, n, d};
    };
    gcommReducer_t r = nullptr;
    auto refused = [&](std::vector<gcommTensor_t> grads, const char* needle) -> std::string {
      r = nullptr;
      gcommStatus_t s = gcommReducerCreate(comm, grads.data(), grads.size(), nullptr, &r);
      if (s != gcommInvalidArgument) return std::string("accepted overlapping gradients: ") + needle;
      if (!message_has(needle))
        return std::string("message '") + gcommGetLastError() + "' lacks '" + needle + "'";
      if (r != nullptr) return "a refused create wrote its out-handle";
      return "";
    };
    std::string e;
    if (!(e = refused({t(0, 64), t(64, 64), t(0, 64)}, "grads[0] and grads[2] overlap")).empty()) return e;
    if (!(e = refused({t(0, 64), t(32, 64)}, "grads[0] and grads[1] overlap")).empty()) return e;
    if (!(e = refused({t(0, 64), t(100, 8), t(16, 8, gcommFloat16)}, "grads[0] and grads[2] overlap"))
             .empty())
      return e;
    // Out of address order, the overlap not between list neighbours.
    if (!(e = refused({t(128, 16), t(0, 16), t(64, 16), t(136, 4)}, "grads[0] and grads[3] overlap")).empty())
      return e;
    // Adjacent and empty gradients are fine.
    std::vector<gcommTensor_t> grads = {t(0, 64), t(64, 64), t(128, 0), t(128, 64, gcommFloat16), t(64, 0)};
    RIG_CHECK(gcommReducerCreate(comm, grads.data(), grads.size(), nullptr, &r));
    // Moving one gradient onto another is refused and changes nothing ...
    if (gcommReducerSetGradData(r, 1, base) != gcommInvalidArgument)
      return "a move onto gradient 0 was accepted";
    if (!message_has("gradient 1 at")) return gcommGetLastError();
    if (!message_has("would overlap gradient 0")) return gcommGetLastError();
    void* where = nullptr;
    RIG_CHECK(gcommReducerGradData(r, 1, &where));
    if (where != base + 64) return "a refused move changed the address";
    if (gcommReducerSetGradData(r, 0, base + 150) != gcommInvalidArgument)
      return "a partial overlap was accepted";
    if (!message_has("would overlap gradient 3")) return gcommGetLastError();
    // ... a move to free memory (or onto its own old place) is fine ...
    RIG_CHECK(gcommReducerSetGradData(r, 0, base + 192));
    RIG_CHECK(gcommReducerSetGradData(r, 1, base + 32));  // into the memory gradient 0 left
    RIG_CHECK(gcommReducerSetGradData(r, 1, base + 40));  // overlapping only its own old range
    // ... and several at once may trade places.
    std::vector<void*> swapped = {base + 64, base, nullptr, base + 128, nullptr};
    if (gcommReducerSetAllGradData(r, swapped.data(), 4) != gcommInvalidArgument)
      return "a short list was accepted";
    std::vector<void*> clash = {base, base + 32, nullptr, base + 128, nullptr};
    if (gcommReducerSetAllGradData(r, clash.data(), 5) != gcommInvalidArgument)
      return "an overlapping set was accepted";
    if (!message_has("grads[0] and grads[1] overlap")) return gcommGetLastError();
    RIG_CHECK(gcommReducerGradData(r, 0, &where));
    if (where != base + 192) return "a refused set changed an address";
    RIG_CHECK(gcommReducerSetAllGradData(r, swapped.data(), 5));
    // The reducer works at the new addresses: one rank's average is its own gradient.
    std::mt19937 rng(9);
    TypedBuffer v = random_buffer(rng, gcommFloat32, 64);
    GradMem g0 = GradMem::view(gcommFloat32, 64, base + 64, on_gpu);
    g0.upload(v, stream);
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    for (size_t i = 0; i < 5; ++i) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    TypedBuffer got = g0.download(stream);
    for (size_t j = 0; j < 64; ++j)
      if (got.get(j) != v.get(j)) return "gradient 0 was not reduced at its new address";
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

// Issue 17 #11: a caller whose gradient memory was replaced since registration
// (PyTorch's zero_grad(set_to_none=True)) made the reducer read freed memory.
// gcommReducerMarkReadyAt compares the caller's address with the registered one
// and refuses a mismatch, marking nothing; the step then completes normally.
TEST_P(ReducerErrors, MarkReadyAtRefusesAGradientWhoseMemoryWasReplaced) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    GradMem a(gcommFloat32, 64, on_gpu), b(gcommFloat16, 33, on_gpu), replacement(gcommFloat32, 64, on_gpu);
    gcommTensor_t t[3] = {a.tensor(), b.tensor(), gcommTensor_t{nullptr, 0, gcommFloat32}};
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, t, 3, nullptr, &r));
    std::mt19937 rng(5);
    TypedBuffer va = random_buffer(rng, gcommFloat32, 64);
    a.upload(va, stream);
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    if (gcommReducerMarkReadyAt(r, 0, replacement.data, stream) != gcommInvalidArgument)
      return "a replaced gradient was marked ready";
    if (!message_has("gradient 0 is at")) return gcommGetLastError();
    if (!message_has("gcommReducerSetGradData")) return gcommGetLastError();
    RIG_CHECK(gcommReducerMarkReadyAt(r, 0, a.data, stream));  // nothing was marked by the refusal
    RIG_CHECK(gcommReducerMarkReadyAt(r, 1, b.data, stream));
    RIG_CHECK(gcommReducerMarkReadyAt(r, 2, nullptr, stream));  // empty: no address to compare
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    TypedBuffer got = a.download(stream);
    for (size_t j = 0; j < 64; ++j)
      if (got.get(j) != va.get(j)) return "the step after the refusal is wrong";
    // Re-pointed between steps, the new address is the one that passes.
    replacement.upload(va, stream);
    RIG_CHECK(gcommReducerSetGradData(r, 0, replacement.data));
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    if (gcommReducerMarkReadyAt(r, 0, a.data, stream) != gcommInvalidArgument)
      return "the old address passed";
    RIG_CHECK(gcommReducerMarkReadyAt(r, 0, replacement.data, stream));
    RIG_CHECK(gcommReducerMarkReady(r, 1, stream));
    RIG_CHECK(gcommReducerMarkReady(r, 2, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

TEST_P(ReducerErrors, BadConfigurationAndHandlesAreRefusedWithTheReason) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    GradMem a(gcommFloat32, 64, on_gpu);
    gcommTensor_t t = a.tensor();
    gcommReducer_t r = nullptr;
    auto refused = [&](const gcommReducerConfig_t* cfg, const gcommTensor_t* ts, size_t n,
                       const char* needle) {
      gcommStatus_t s = gcommReducerCreate(comm, ts, n, cfg, &r);
      if (s == gcommSuccess) return std::string("accepted: ") + needle;
      if (!message_has(needle))
        return std::string("message '") + gcommGetLastError() + "' lacks '" + needle + "'";
      return std::string();
    };
    std::string e;
    gcommReducerConfig_t cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
    cfg.wire_dtype = 7;
    if (!(e = refused(&cfg, &t, 1, "wire_dtype 7")).empty()) return e;
    cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
    cfg.bucket_cap_bytes = 0;
    if (!(e = refused(&cfg, &t, 1, "bucket_cap_bytes")).empty()) return e;
    cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
    cfg.unused_grads = 5;
    if (!(e = refused(&cfg, &t, 1, "unused_grads 5")).empty()) return e;
    gcommReducerConfig_t raw{};
    raw.size = sizeof raw;
    if (!(e = refused(&raw, &t, 1, "_INITIALIZER")).empty()) return e;
    if (!(e = refused(nullptr, &t, 0, "at least one gradient")).empty()) return e;
    if (!(e = refused(nullptr, nullptr, 3, "NULL")).empty()) return e;
    gcommTensor_t null_data{nullptr, 5, gcommFloat32};
    if (!(e = refused(nullptr, &null_data, 1, "data is NULL")).empty()) return e;
    gcommTensor_t bad_dtype{a.data, 5, static_cast<gcommDataType_t>(9)};
    if (!(e = refused(nullptr, &bad_dtype, 1, "grads[0].dtype")).empty()) return e;
    cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
    cfg.grad_as_bucket_view = 1;
    if (!(e = refused(&cfg, &t, 1, "must be NULL with grad_as_bucket_view")).empty()) return e;
    // Memory on the wrong side: host memory for a GPU reducer, or the reverse.
    GradMem other(gcommFloat32, 64, !on_gpu && gpu_available());
    if (other.gpu != on_gpu) {
      gcommTensor_t wrong = other.tensor();
      if (!(e = refused(nullptr, &wrong, 1, "grads[0] is")).empty()) return e;
    }
    if (r != nullptr) return "a refused create wrote the handle";
    if (gcommReducerCreate(reinterpret_cast<gcommComm_t>(&t), &t, 1, nullptr, &r) != gcommInvalidArgument)
      return "a bogus communicator handle was accepted";
    RIG_CHECK(gcommReducerCreate(comm, &t, 1, nullptr, &r));
    if (gcommCommDestroy(comm) != gcommInvalidState || !message_has("reducer"))
      return "a communicator in use was destroyed";
    RIG_CHECK(gcommReducerDestroy(r));
    if (gcommReducerDestroy(r) != gcommInvalidArgument) return "double destroy was accepted";
    if (gcommReducerBeginStep(r, 1) != gcommInvalidArgument) return "use after destroy was accepted";
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(, ReducerErrors, ::testing::Values(RigDevice::kHost, RigDevice::kGpu), rig_name);

}  // namespace
}  // namespace gradcomm::test
