#include "reducer/outer_sync.hpp"

#include <cstring>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "memory/device_bytes.hpp"

namespace gradcomm::reducer {

namespace {

// '2': the state records overlap_steps and each fragment's sync in flight.
constexpr char kStateMagic[8] = {'G', 'C', 'O', 'U', 'T', 'E', 'R', '2'};

// A C API call made from inside the library: its failure as an Error, prefixed.
void check(gcommStatus_t status, const char* what) {
  if (status != gcommSuccess) fail(status, "outer synchronization: ", what, ": ", gcommGetLastError());
}

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <class T>
T take(const uint8_t*& p, const uint8_t* end, const char* what) {
  require(static_cast<size_t>(end - p) >= sizeof(T), "the outer synchronization state ends inside its ",
          what);
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

}  // namespace

void OuterSchedule::check() const {
  require(sync_every >= 1, "sync_every must be at least 1");
  require(fragments >= 1 && fragments <= sync_every, "fragments ", fragments, " must be in 1..sync_every (",
          sync_every, "): each fragment syncs once every sync_every steps");
  require(overlap <= sync_every / fragments, "overlap_steps ", overlap,
          " must be at most sync_every / fragments (", sync_every, " / ", fragments, " = ",
          sync_every / fragments, "): a fragment's sync lands before the next one starts");
}

int OuterSchedule::due(uint64_t t) const {
  for (uint32_t p = 0; p < fragments; ++p)
    if (t >= phase(p) && (t - phase(p)) % sync_every == 0) return static_cast<int>(p);
  return -1;
}

std::vector<std::pair<size_t, size_t>> cut_fragments(const std::vector<size_t>& counts, uint32_t fragments) {
  require(fragments >= 1, "fragments must be at least 1");
  require(counts.size() >= fragments, "fragments ", fragments, " is more than the ", counts.size(),
          " parameters (a fragment holds whole tensors)");
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<std::pair<size_t, size_t>> out;
  size_t first = 0, running = 0;
  for (uint32_t p = 0; p < fragments; ++p) {
    const size_t left_fragments = fragments - p - 1;
    size_t end = first;
    // Take at least one tensor, leave one for each later fragment, and stop once
    // the running count reaches this fragment's share.
    do {
      running += counts[end++];
    } while (end < counts.size() - left_fragments &&
             static_cast<double>(running) < static_cast<double>(total) * (p + 1) / fragments);
    if (p + 1 == fragments) end = counts.size();
    out.emplace_back(first, end - first);
    first = end;
  }
  return out;
}

void OuterSync::ReducerDeleter::operator()(gcommReducer* r) const noexcept {
  if (gcommReducerDestroy(r) != gcommSuccess)
    GCOMM_WARN("outer synchronization: destroying a fragment's reducer: ", gcommGetLastError());
}

OuterSync::Buffer::Buffer(memory::CachingAllocator& a, size_t values) : allocator(&a) {
  data = static_cast<float*>(a.allocate(values * sizeof(float), nullptr));
}

OuterSync::Buffer::~Buffer() {
  if (allocator == nullptr) return;
  try {
    allocator->deallocate(data, nullptr);
  } catch (const std::exception& e) {  // a sticky CUDA error: nothing to give back to
    GCOMM_WARN("outer synchronization: freeing a buffer: ", e.what());
  }
}

OuterSync::OuterSync(gcommComm_t comm, const gcommTensor_t* params, size_t n, const gcommOuterSyncConfig_t& c)
    : comm_(comm) {
  require(params != nullptr || n == 0, "params is NULL");
  require(n >= 1, "outer synchronization needs at least one parameter");
  check_list_length(n, "num_params");  // an absurd count is refused before the array is read
  schedule_.sync_every = c.sync_every;
  schedule_.fragments = c.fragments;
  schedule_.overlap = c.overlap_steps;
  schedule_.check();
  require(c.nesterov == 0 || c.nesterov == 1, "nesterov must be 0 or 1, not ", c.nesterov);
  require(c.mix >= 0.0f && c.mix < 1.0f, "mix must be in [0, 1), not ", c.mix);
  rule_.lr = c.outer_lr;
  rule_.momentum = c.outer_momentum;
  rule_.nesterov = c.nesterov == 1;
  // Without an overlap the parameters are the ones the pseudo-gradients were taken
  // from: DiLoCo replaces them.
  rule_.mix = c.overlap_steps > 0 ? c.mix : 0.0f;
  kernels::outer::check_rule(rule_);
  if (c.compression != nullptr) compression_ = c.compression;
  wire_ = compression_.empty() ? cat("dtype ", c.wire_dtype) : compression_;
  check(gcommCommDevice(comm, &device_), "the communicator");
  params_.assign(params, params + n);
  std::vector<size_t> counts;
  for (size_t k = 0; k < n; ++k) {
    const gcommTensor_t& p = params_[k];
    require(p.dtype == gcommFloat32, "params[", k, "] is ", dtype_name(p.dtype),
            ": outer synchronization keeps f32 parameters (a model in f16/bf16 keeps f32 master weights)");
    checked_span(p.data, p.count, p.dtype, "params");
    if (p.count > 0)
      require_usable(pointer_info(p.data), device_, "params", static_cast<long long>(k),
                     "the communicator is on");
    offsets_.push_back(values_);
    values_ += p.count;
    counts.push_back(p.count);
  }
  const auto cuts = cut_fragments(counts, c.fragments);

  allocator_ = memory::make_caching_allocator(device_, gcommMemoryDefault, memory::AllocatorOptions{});
  const size_t bytes = values_ * sizeof(float);
  outer_ = std::make_unique<Buffer>(*allocator_, values_);
  momentum_ = std::make_unique<Buffer>(*allocator_, values_);
  delta_ = std::make_unique<Buffer>(*allocator_, values_);
  memory::zero_bytes(momentum_->data, bytes, device_, nullptr);

  for (const auto& [first, count] : cuts) {
    Fragment f;
    f.first = first;
    f.count = count;
    f.offset = offsets_[first];
    std::vector<gcommTensor_t> deltas;
    for (size_t k = first; k < first + count; ++k) {
      deltas.push_back(gcommTensor_t{delta_->data + offsets_[k], params_[k].count, gcommFloat32});
      f.values += params_[k].count;
    }
    gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
    rc.bucket_cap_bytes = c.bucket_cap_bytes;
    rc.wire_dtype = c.wire_dtype;
    rc.rebuild_buckets = 0;                       // every pseudo-gradient is marked at once, in plan order
    rc.bucket_autotune = gcommBucketAutotuneOff;  // ... so there is no arrival to measure
    gcommReducer_t made = nullptr;
    check(gcommReducerCreate(comm, deltas.data(), deltas.size(), &rc, &made),
          "the pseudo-gradients' reducer");
    f.reducer.reset(made);
    if (!compression_.empty())
      check(gcommReducerEnableCompressionText(made, compression_.c_str(), nullptr),
            "the pseudo-gradients' compression");
    fragments_.push_back(std::move(f));
  }

  // Last, once everything that can be refused was made: every rank starts from rank
  // 0's parameters, which become the outer ones. The device is settled first (the
  // caller's work that made the parameters, on any stream) and after (the caller's
  // next steps, on any stream, see them).
  settle();
  for (size_t k = 0; k < n; ++k) {
    if (params_[k].count == 0) continue;
    check(gcommBroadcast(comm, params_[k].data, params_[k].data, params_[k].count, gcommFloat32, 0, nullptr),
          "the parameters' broadcast from rank 0");
    memory::copy_bytes(outer_->data + offsets_[k], params_[k].data, params_[k].count * sizeof(float), device_,
                       nullptr, cudaMemcpyDeviceToDevice);
  }
  settle();
}

OuterSync::~OuterSync() {
  try {
    drop_in_flight();  // a reducer is not destroyed inside its step
    settle();          // the last sync's kernels, on the caller's stream, before the buffers go
  } catch (const std::exception& e) {
    GCOMM_WARN("outer synchronization: destroy: ", e.what());
  }
}

void OuterSync::settle() const {
  if (device_.kind != gcommDeviceCuda) return;
  DeviceGuard guard(device_);
  GCOMM_CUDA_CHECK(cudaDeviceSynchronize());
}

kernels::Target OuterSync::target(gcommStream_t stream) const {
  kernels::Target t{device_, stream};
  t.locations_known = true;  // the outer buffers are ours, the parameters checked at creation
  return t;
}

int OuterSync::step(gcommStream_t stream) {
  ++inner_steps_;
  int landed = 0;
  for (Fragment& f : fragments_)
    if (f.lands_at == inner_steps_) {
      land(f, stream);
      ++landed;
    }
  const int due = schedule_.due(inner_steps_);
  if (due < 0) return landed;
  Fragment& f = fragments_[static_cast<size_t>(due)];
  start(f, stream);
  if (schedule_.overlap > 0) {
    f.lands_at = inner_steps_ + schedule_.overlap;
    return landed;
  }
  land(f, stream);
  return landed + 1;
}

void OuterSync::start(Fragment& f, gcommStream_t stream) {
  const kernels::Target t = target(stream);
  for (size_t k = f.first; k < f.first + f.count; ++k)
    kernels::outer::pseudo_gradient(outer_->data + offsets_[k], static_cast<const float*>(params_[k].data),
                                    delta_->data + offsets_[k], params_[k].count, t);
  f.counted = gcommCommBytesSent(comm_, &f.sent_before) == gcommSuccess;  // socket and shm count
  check(gcommReducerBeginStep(f.reducer.get(), 1), "begin the pseudo-gradients' step");
  // Every pseudo-gradient marked: the buckets go to the communicator (its lane on the
  // host, the reducer's stream on a GPU) and are averaged while the caller goes on.
  for (size_t i = f.count; i-- > 0;) check(gcommReducerMarkReady(f.reducer.get(), i, stream), "mark ready");
  f.averaged = false;
}

void OuterSync::average(Fragment& f, gcommStream_t stream) {
  int skip = 0;
  check(gcommReducerFinalize(f.reducer.get(), stream, &skip), "the pseudo-gradients' average");
  uint64_t sent_after = 0;
  if (f.counted && gcommCommBytesSent(comm_, &sent_after) == gcommSuccess)
    bytes_sent_ += sent_after - f.sent_before;
  f.counted = false;
  f.averaged = true;
  f.non_finite = skip != 0;
}

void OuterSync::land(Fragment& f, gcommStream_t stream) {
  if (!f.averaged) average(f, stream);
  f.lands_at = 0;
  f.averaged = false;
  if (f.non_finite) {  // an Inf/NaN average: the outer state and the parameters stay as they are
    ++skipped_;
    GCOMM_WARN(
        "outer synchronization: the averaged pseudo-gradient of a fragment held Inf/NaN (applied after ",
        "inner step ", inner_steps_, "); its outer step was skipped");
    return;
  }
  const kernels::Target t = target(stream);
  for (size_t k = f.first; k < f.first + f.count; ++k)
    kernels::outer::outer_update(outer_->data + offsets_[k], momentum_->data + offsets_[k],
                                 delta_->data + offsets_[k], static_cast<float*>(params_[k].data),
                                 params_[k].count, rule_, t);
  ++syncs_;
}

void OuterSync::average_in_flight() {
  for (Fragment& f : fragments_)
    if (f.lands_at != 0 && !f.averaged) average(f, nullptr);
}

void OuterSync::drop_in_flight() {
  average_in_flight();
  for (Fragment& f : fragments_) {
    f.lands_at = 0;
    f.averaged = false;
  }
}

gcommOuterSyncStats_t OuterSync::stats() const {
  gcommOuterSyncStats_t s = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
  s.inner_steps = inner_steps_;
  s.syncs = syncs_;
  s.skipped_syncs = skipped_;
  s.values = values_;
  s.bytes_sent = bytes_sent_;
  return s;
}

// The state: magic, the wire, the shapes (count per tensor), fragments, sync_every,
// overlap_steps, the inner step count, the outer parameters and momentum (f32), then
// per fragment its compression state (u64 bytes, then the bytes), then per fragment
// its sync in flight: the step it lands after (u64, 0: none), whether its average
// held Inf/NaN (u8), and for one in flight its averaged pseudo-gradient (f32).
std::vector<uint8_t> OuterSync::save() {
  // A sync in flight is averaged now (its collectives were all issued; this waits
  // for them) and lands on its step as it would have.
  average_in_flight();
  settle();  // the last outer step, on the caller's stream
  std::vector<uint8_t> out(kStateMagic, kStateMagic + sizeof kStateMagic);
  put(out, static_cast<uint64_t>(wire_.size()));
  out.insert(out.end(), wire_.begin(), wire_.end());
  put(out, static_cast<uint64_t>(params_.size()));
  for (const gcommTensor_t& p : params_) put(out, static_cast<uint64_t>(p.count));
  put(out, schedule_.fragments);
  put(out, schedule_.sync_every);
  put(out, schedule_.overlap);
  put(out, inner_steps_);
  for (const float* buffer : {outer_->data, momentum_->data}) {
    const size_t at = out.size();
    out.resize(at + values_ * sizeof(float));
    memory::copy_bytes(out.data() + at, buffer, values_ * sizeof(float), device_, nullptr,
                       cudaMemcpyDeviceToHost);
  }
  for (const Fragment& f : fragments_) {
    const std::vector<uint8_t> state = compression_state(f);
    put(out, static_cast<uint64_t>(state.size()));
    out.insert(out.end(), state.begin(), state.end());
  }
  for (const Fragment& f : fragments_) {
    put(out, f.lands_at);
    put(out, static_cast<uint8_t>(f.non_finite && f.lands_at != 0 ? 1 : 0));
    if (f.lands_at == 0) continue;
    const size_t at = out.size();
    out.resize(at + f.values * sizeof(float));
    memory::copy_bytes(out.data() + at, delta_->data + f.offset, f.values * sizeof(float), device_, nullptr,
                       cudaMemcpyDeviceToHost);
  }
  return out;
}

void OuterSync::load(const uint8_t* data, size_t size) {
  require(data != nullptr || size == 0, "data is NULL");
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  require(size >= sizeof kStateMagic, "not an outer synchronization state (", size, " bytes)");
  require(std::memcmp(p, kStateMagic, sizeof kStateMagic - 1) != 0 || p[sizeof kStateMagic - 1] >= '2',
          "an outer synchronization state of an older format (", static_cast<char>(p[sizeof kStateMagic - 1]),
          "), from before overlap_steps: it cannot be loaded");
  require(std::memcmp(p, kStateMagic, sizeof kStateMagic) == 0,
          "not an outer synchronization state (wrong magic)");
  p += sizeof kStateMagic;
  const auto wire_bytes = take<uint64_t>(p, end, "wire");
  require(static_cast<uint64_t>(end - p) >= wire_bytes,
          "the outer synchronization state ends inside its wire");
  const std::string wire(reinterpret_cast<const char*>(p), static_cast<size_t>(wire_bytes));
  p += wire_bytes;
  require(wire == wire_, "the state was saved with the pseudo-gradients' wire '", wire,
          "', this object's is '", wire_, "'");
  const auto tensors = take<uint64_t>(p, end, "shapes");
  require(tensors == params_.size(), "the state has ", tensors, " parameters, this object ", params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto count = take<uint64_t>(p, end, "shapes");
    require(count == params_[k].count, "the state's parameter ", k, " has ", count, " values, this object's ",
            params_[k].count);
  }
  const auto fragments = take<uint32_t>(p, end, "fragments");
  const auto sync_every = take<uint32_t>(p, end, "sync_every");
  const auto overlap = take<uint32_t>(p, end, "overlap_steps");
  require(
      fragments == schedule_.fragments && sync_every == schedule_.sync_every && overlap == schedule_.overlap,
      "the state has fragments ", fragments, ", sync_every ", sync_every, " and overlap_steps ", overlap,
      ", this object ", schedule_.fragments, ", ", schedule_.sync_every, " and ", schedule_.overlap);
  const auto steps = take<uint64_t>(p, end, "step count");
  const size_t bytes = values_ * sizeof(float);
  require(static_cast<size_t>(end - p) >= 2 * bytes, "the state ends inside its outer parameters");
  const uint8_t* floats = p;
  p += 2 * bytes;
  std::vector<std::pair<const uint8_t*, uint64_t>> states;
  for (size_t i = 0; i < fragments_.size(); ++i) {
    const auto need = take<uint64_t>(p, end, "compression state");
    require(static_cast<uint64_t>(end - p) >= need, "the state ends inside a compression state");
    require(need == 0 || !compression_.empty(),
            "the state carries a compression state, this object has none");
    states.emplace_back(p, need);
    p += need;
  }
  struct InFlight {
    uint64_t lands_at = 0;
    bool non_finite = false;
    const uint8_t* average = nullptr;
  };
  std::vector<InFlight> in_flight(fragments_.size());
  for (size_t i = 0; i < fragments_.size(); ++i) {
    InFlight& f = in_flight[i];
    f.lands_at = take<uint64_t>(p, end, "syncs in flight");
    f.non_finite = take<uint8_t>(p, end, "syncs in flight") != 0;
    if (f.lands_at == 0) continue;
    require(f.lands_at > steps && f.lands_at <= steps + schedule_.overlap,
            "the state's sync in flight lands after ", "step ", f.lands_at, ", not within overlap_steps (",
            schedule_.overlap, ") of its step count ", steps);
    const size_t need = fragments_[i].values * sizeof(float);
    require(static_cast<size_t>(end - p) >= need, "the state ends inside a sync in flight");
    f.average = p;
    p += need;
  }
  require(p == end, "the state has ", end - p, " bytes past its end");
  // Everything is checked. This object's syncs in flight are waited for and dropped
  // (a reducer loads no state inside its step); the compressions' states next, each
  // of which its reducer may still refuse (a plan of other buckets), so the ones
  // loaded before a refusal are put back as they were; then the outer state.
  drop_in_flight();
  settle();
  std::vector<std::vector<uint8_t>> before(fragments_.size());
  size_t loaded = 0;
  try {
    for (; loaded < fragments_.size(); ++loaded) {
      if (states[loaded].second == 0) continue;
      before[loaded] = compression_state(fragments_[loaded]);
      check(gcommReducerLoadCompressionState(fragments_[loaded].reducer.get(), states[loaded].first,
                                             states[loaded].second),
            "the compression state");
    }
  } catch (...) {
    for (size_t i = 0; i < loaded; ++i)
      if (!before[i].empty())
        gcommReducerLoadCompressionState(fragments_[i].reducer.get(), before[i].data(), before[i].size());
    throw;
  }
  memory::copy_bytes(outer_->data, floats, bytes, device_, nullptr, cudaMemcpyHostToDevice);
  memory::copy_bytes(momentum_->data, floats + bytes, bytes, device_, nullptr, cudaMemcpyHostToDevice);
  for (size_t i = 0; i < fragments_.size(); ++i) {
    Fragment& f = fragments_[i];
    f.lands_at = in_flight[i].lands_at;
    f.averaged = f.lands_at != 0;
    f.non_finite = in_flight[i].non_finite;
    if (f.lands_at != 0)
      memory::copy_bytes(delta_->data + f.offset, in_flight[i].average, f.values * sizeof(float), device_,
                         nullptr, cudaMemcpyHostToDevice);
  }
  settle();
  inner_steps_ = steps;
}

std::vector<uint8_t> OuterSync::compression_state(const Fragment& f) const {
  std::vector<uint8_t> out;
  if (compression_.empty()) return out;
  size_t need = 0;
  check(gcommReducerSaveCompressionState(f.reducer.get(), nullptr, 0, &need), "the compression state");
  out.resize(need);
  if (need > 0)
    check(gcommReducerSaveCompressionState(f.reducer.get(), out.data(), need, &need),
          "the compression state");
  return out;
}

}  // namespace gradcomm::reducer
