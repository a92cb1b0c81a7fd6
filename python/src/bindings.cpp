// gradcomm._gradcomm: the C API as a Python extension (nanobind).
//
// Thin on purpose: handles travel as integers, buffers as (address, count, dtype)
// tuples, and the Python package (gradcomm/) gives them classes, lifetimes and
// torch tensors. What this file adds is what Python cannot do safely itself:
//  - the config and statistics structs are bound field by field against the
//    header, so a renamed or retyped field breaks the build; every struct lists
//    its bound fields in __fields__, and tests/test_bindings.py fails when the
//    header has a field that is not bound;
//  - every call that can block (collectives, init, reducer steps) releases the
//    GIL, so the N ranks of a local communicator can run on N Python threads;
//  - a failed call raises while still on the calling thread, carrying the status
//    and that thread's last-error message (gradcomm.Error and its subclasses).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---- errors ------------------------------------------------------------------

struct ApiError {
  gcommStatus_t status;
  std::string message;
};

// Set by gradcomm/__init__.py to gradcomm/errors.py's from_status: factory(status, name, message) ->
// exception instance.
nb::object& error_factory() {
  static nb::object* factory = new nb::object();  // never destroyed: outlives the interpreter's teardown
  return *factory;
}

void check(gcommStatus_t status) {
  if (status != gcommSuccess) throw ApiError{status, gcommGetLastError()};
}

// ---- values ------------------------------------------------------------------

using Ptr = std::uintptr_t;
using TensorTuple = std::tuple<Ptr, size_t, int>;  // (address, count, dtype)

void* to_ptr(Ptr p) {
  return reinterpret_cast<void*>(p);
}
gcommStream_t to_stream(Ptr s) {
  return reinterpret_cast<gcommStream_t>(s);
}
Ptr from_ptr(const void* p) {
  return reinterpret_cast<Ptr>(p);
}

gcommDevice_t make_device(int kind, int ordinal) {
  gcommDevice_t d;
  d.kind = static_cast<gcommDeviceKind_t>(kind);
  d.ordinal = ordinal;
  return d;
}

std::vector<gcommTensor_t> to_tensors(const std::vector<TensorTuple>& list) {
  std::vector<gcommTensor_t> out;
  out.reserve(list.size());
  for (const auto& [p, n, dt] : list)
    out.push_back(gcommTensor_t{to_ptr(p), n, static_cast<gcommDataType_t>(dt)});
  return out;
}

// The size-query string convention of every header.
template <class Fn>
std::string read_string(Fn&& fn) {
  size_t required = 0;
  check(fn(nullptr, 0, &required));
  std::string s(required, '\0');
  if (required > 0) check(fn(s.data(), s.size(), &required));
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

template <class Fn>
nb::bytes read_bytes(Fn&& fn) {
  size_t required = 0;
  check(fn(nullptr, 0, &required));
  std::string s(required, '\0');
  if (required > 0) check(fn(s.data(), s.size(), &required));
  return nb::bytes(s.data(), required);
}

// ---- structs -----------------------------------------------------------------

// gcommLatePhase_t as Python names it: None, or the phase's short name.
nb::object late_phase_name(gcommLatePhase_t p) {
  switch (p) {
    case gcommLateOptimizer:
      return nb::str("optimizer");
    case gcommLateData:
      return nb::str("data");
    case gcommLateCompute:
      return nb::str("compute");
    case gcommLateLink:
      return nb::str("link");
    case gcommLateNone:
      break;
  }
  return nb::none();
}

// Binds a struct's fields and records their names in __fields__.
template <class T>
class StructBinding {
 public:
  StructBinding(nb::module_& m, const char* name, T initial) : cls_(m, name) {
    cls_.def("__init__", [initial](T* self) { new (self) T(initial); });
  }
  template <class M>
  StructBinding& field(const char* name, M T::*member) {
    cls_.def_rw(name, member);
    names_.emplace_back(name);
    return *this;
  }
  template <class Get, class Set>
  StructBinding& property(const char* name, Get get, Set set) {
    cls_.def_prop_rw(name, get, set);
    names_.emplace_back(name);
    return *this;
  }
  StructBinding& readonly(const char* name, nb::object (*get)(const T&)) {
    cls_.def_prop_ro(name, get);
    names_.emplace_back(name);
    return *this;
  }
  ~StructBinding() {
    nb::list names;
    for (const std::string& n : names_) names.append(n);
    cls_.attr("__fields__") = nb::tuple(names);
    cls_.def("__repr__", [names = names_](nb::handle self) {
      std::string s = nb::type_name(self.type()).c_str();
      s += "(";
      for (size_t i = 0; i < names.size(); ++i) {
        if (i > 0) s += ", ";
        s += names[i] + "=" + nb::repr(self.attr(names[i].c_str())).c_str();
      }
      return s + ")";
    });
  }

 private:
  nb::class_<T> cls_;
  std::vector<std::string> names_;
};

// gcommCommConfig_t holds two C strings; the Python object owns their storage.
struct CommConfig {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  std::string master_addr, job_key;
  bool has_addr = false, has_key = false;
  gcommCommConfig_t resolved() const {
    gcommCommConfig_t r = c;
    r.master_addr = has_addr ? master_addr.c_str() : nullptr;
    r.job_key = has_key ? job_key.c_str() : nullptr;
    return r;
  }
};

nb::object optional_string(bool has, const std::string& s) {
  return has ? nb::object(nb::str(s.c_str())) : nb::none();
}

void bind_structs(nb::module_& m) {
  StructBinding<gcommDevice_t>(m, "Device", gcommHostDevice())
      .field("kind", &gcommDevice_t::kind)
      .field("ordinal", &gcommDevice_t::ordinal);

  // gcommCommConfig_t, through its owner.
  {
    nb::class_<CommConfig> cls(m, "CommConfig");
    cls.def(nb::init<>());
    std::vector<std::string> names;
#define GCOMM_COMM_FIELD(name)                                                   \
  cls.def_prop_rw(                                                               \
      #name, [](const CommConfig& s) { return s.c.name; },                       \
      [](CommConfig& s, decltype(gcommCommConfig_t::name) v) { s.c.name = v; }); \
  names.emplace_back(#name)
    GCOMM_COMM_FIELD(rank);
    GCOMM_COMM_FIELD(world_size);
    GCOMM_COMM_FIELD(local_rank);
    GCOMM_COMM_FIELD(master_port);
    GCOMM_COMM_FIELD(device);
    GCOMM_COMM_FIELD(timeout_s);
    GCOMM_COMM_FIELD(transport);
    GCOMM_COMM_FIELD(reserved_v1);
#undef GCOMM_COMM_FIELD
    cls.def_prop_rw(
        "master_addr", [](const CommConfig& s) { return optional_string(s.has_addr, s.master_addr); },
        [](CommConfig& s, nb::object v) {
          s.has_addr = !v.is_none();
          s.master_addr = s.has_addr ? nb::cast<std::string>(v) : std::string();
        },
        nb::arg("value").none());
    cls.def_prop_rw(
        "job_key", [](const CommConfig& s) { return optional_string(s.has_key, s.job_key); },
        [](CommConfig& s, nb::object v) {
          s.has_key = !v.is_none();
          s.job_key = s.has_key ? nb::cast<std::string>(v) : std::string();
        },
        nb::arg("value").none());
    names.emplace_back("master_addr");
    names.emplace_back("job_key");
    nb::list l;
    for (const auto& n : names) l.append(n);
    cls.attr("__fields__") = nb::tuple(l);
  }

  gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
  StructBinding<gcommReducerConfig_t>(m, "ReducerConfig", rc)
      .field("bucket_cap_bytes", &gcommReducerConfig_t::bucket_cap_bytes)
      .field("first_bucket_bytes", &gcommReducerConfig_t::first_bucket_bytes)
      .field("wire_dtype", &gcommReducerConfig_t::wire_dtype)
      .field("grad_as_bucket_view", &gcommReducerConfig_t::grad_as_bucket_view)
      .field("average", &gcommReducerConfig_t::average)
      .field("unused_grads", &gcommReducerConfig_t::unused_grads)
      .field("rebuild_buckets", &gcommReducerConfig_t::rebuild_buckets)
      .field("mode", &gcommReducerConfig_t::mode)
      .field("bucket_autotune", &gcommReducerConfig_t::bucket_autotune)
      .field("reserved_v2", &gcommReducerConfig_t::reserved_v2)
      .property(
          "scaler", [](const gcommReducerConfig_t& c) { return from_ptr(c.scaler); },
          [](gcommReducerConfig_t& c, Ptr h) { c.scaler = reinterpret_cast<gcommGradScaler_t>(h); });

  gcommGradScalerConfig_t sc = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  StructBinding<gcommGradScalerConfig_t>(m, "GradScalerConfig", sc)
      .field("init_scale", &gcommGradScalerConfig_t::init_scale)
      .field("growth_factor", &gcommGradScalerConfig_t::growth_factor)
      .field("backoff_factor", &gcommGradScalerConfig_t::backoff_factor)
      .field("growth_interval", &gcommGradScalerConfig_t::growth_interval)
      .field("hysteresis", &gcommGradScalerConfig_t::hysteresis)
      .field("min_scale", &gcommGradScalerConfig_t::min_scale);

  StructBinding<gcommGradScalerState_t>(m, "GradScalerState", gcommGradScalerState_t{1.0f, 0, 1, 0})
      .field("scale", &gcommGradScalerState_t::scale)
      .field("growth_tracker", &gcommGradScalerState_t::growth_tracker)
      .field("hysteresis_left", &gcommGradScalerState_t::hysteresis_left)
      .field("skipped_last", &gcommGradScalerState_t::skipped_last);

  gcommAllocatorConfig_t ac = GCOMM_ALLOCATOR_CONFIG_INITIALIZER;
  StructBinding<gcommAllocatorConfig_t>(m, "AllocatorConfig", ac)
      .field("kind", &gcommAllocatorConfig_t::kind)
      .field("reserved0", &gcommAllocatorConfig_t::reserved0)
      .field("pool_limit", &gcommAllocatorConfig_t::pool_limit)
      .field("release_threshold", &gcommAllocatorConfig_t::release_threshold)
      .field("max_split_size", &gcommAllocatorConfig_t::max_split_size);

  StructBinding<gcommAllocatorStat_t>(m, "AllocatorStat", gcommAllocatorStat_t{})
      .field("current", &gcommAllocatorStat_t::current)
      .field("peak", &gcommAllocatorStat_t::peak)
      .field("total_allocated", &gcommAllocatorStat_t::total_allocated)
      .field("total_freed", &gcommAllocatorStat_t::total_freed);

  gcommAllocatorStats_t as = GCOMM_ALLOCATOR_STATS_INITIALIZER;
  StructBinding<gcommAllocatorStats_t>(m, "AllocatorStats", as)
      .field("allocated_bytes", &gcommAllocatorStats_t::allocated_bytes)
      .field("requested_bytes", &gcommAllocatorStats_t::requested_bytes)
      .field("reserved_bytes", &gcommAllocatorStats_t::reserved_bytes)
      .field("allocated_blocks", &gcommAllocatorStats_t::allocated_blocks)
      .field("active_blocks", &gcommAllocatorStats_t::active_blocks)
      .field("segments", &gcommAllocatorStats_t::segments)
      .field("malloc_calls", &gcommAllocatorStats_t::malloc_calls)
      .field("free_calls", &gcommAllocatorStats_t::free_calls)
      .field("cache_hits", &gcommAllocatorStats_t::cache_hits)
      .field("upstream_allocs", &gcommAllocatorStats_t::upstream_allocs)
      .field("upstream_frees", &gcommAllocatorStats_t::upstream_frees)
      .field("ooms", &gcommAllocatorStats_t::ooms)
      .field("cache_flushes", &gcommAllocatorStats_t::cache_flushes)
      .field("events_recorded", &gcommAllocatorStats_t::events_recorded);

  StructBinding<gcommReducerStats_t>(m, "ReducerStats", gcommReducerStats_t{})
      .field("synced_steps", &gcommReducerStats_t::synced_steps)
      .field("accumulation_steps", &gcommReducerStats_t::accumulation_steps)
      .field("buckets_launched", &gcommReducerStats_t::buckets_launched)
      .field("num_buckets", &gcommReducerStats_t::num_buckets)
      .field("wire_bytes_per_step", &gcommReducerStats_t::wire_bytes_per_step)
      .field("grad_bytes", &gcommReducerStats_t::grad_bytes)
      .field("rebuilt", &gcommReducerStats_t::rebuilt)
      .field("reserved", &gcommReducerStats_t::reserved);

  gcommReducerStepTiming_t st = GCOMM_REDUCER_STEP_TIMING_INITIALIZER;
  StructBinding<gcommReducerStepTiming_t>(m, "ReducerStepTiming", st)
      .field("step", &gcommReducerStepTiming_t::step)
      .field("measured_steps", &gcommReducerStepTiming_t::measured_steps)
      .field("step_us", &gcommReducerStepTiming_t::step_us)
      .field("backward_us", &gcommReducerStepTiming_t::backward_us)
      .field("comm_us", &gcommReducerStepTiming_t::comm_us)
      .field("overlapped_comm_us", &gcommReducerStepTiming_t::overlapped_comm_us)
      .field("overlap", &gcommReducerStepTiming_t::overlap)
      .field("stride", &gcommReducerStepTiming_t::stride);

  gcommBucketAutotuneReport_t ba = GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER;
  StructBinding<gcommBucketAutotuneReport_t>(m, "BucketAutotuneReport", ba)
      .readonly("state",
                [](const gcommBucketAutotuneReport_t& r) -> nb::object {
                  static const char* const names[] = {"off", "measuring", "chosen", "skipped"};
                  const int s = static_cast<int>(r.state);
                  return nb::str(s >= 0 && s < 4 ? names[s] : "unknown");
                })
      .field("chosen_at_step", &gcommBucketAutotuneReport_t::chosen_at_step)
      .field("bucket_cap_bytes", &gcommBucketAutotuneReport_t::bucket_cap_bytes)
      .field("first_bucket_bytes", &gcommBucketAutotuneReport_t::first_bucket_bytes)
      .field("configured_cap_bytes", &gcommBucketAutotuneReport_t::configured_cap_bytes)
      .field("link_alpha_us", &gcommBucketAutotuneReport_t::link_alpha_us)
      .field("link_bytes_per_s", &gcommBucketAutotuneReport_t::link_bytes_per_s)
      .field("backward_us", &gcommBucketAutotuneReport_t::backward_us)
      .field("predicted_us", &gcommBucketAutotuneReport_t::predicted_us)
      .field("predicted_configured_us", &gcommBucketAutotuneReport_t::predicted_configured_us);

  gcommStragglerReport_t sr = GCOMM_STRAGGLER_REPORT_INITIALIZER;
  StructBinding<gcommStragglerReport_t>(m, "StragglerReport", sr)
      .field("windows", &gcommStragglerReport_t::windows)
      .field("named_windows", &gcommStragglerReport_t::named_windows)
      .field("first_step", &gcommStragglerReport_t::first_step)
      .field("last_step", &gcommStragglerReport_t::last_step)
      .field("late_rank", &gcommStragglerReport_t::late_rank)
      .field("late_steps", &gcommStragglerReport_t::late_steps)
      .field("window_steps", &gcommStragglerReport_t::window_steps)
      .readonly("phase", [](const gcommStragglerReport_t& r) { return late_phase_name(r.phase); })
      .field("late_ms", &gcommStragglerReport_t::late_ms)
      .field("last_step_late_rank", &gcommStragglerReport_t::last_step_late_rank)
      .readonly("last_step_phase",
                [](const gcommStragglerReport_t& r) { return late_phase_name(r.last_step_phase); })
      .field("last_step_late_ms", &gcommStragglerReport_t::last_step_late_ms)
      .field("clock_offset_us", &gcommStragglerReport_t::clock_offset_us);

  gcommNonFiniteReport_t nf = GCOMM_NONFINITE_REPORT_INITIALIZER;
  StructBinding<gcommNonFiniteReport_t>(m, "NonFiniteReport", nf)
      .field("windows", &gcommNonFiniteReport_t::windows)
      .field("first_step", &gcommNonFiniteReport_t::first_step)
      .field("last_step", &gcommNonFiniteReport_t::last_step)
      .field("nonfinite_steps", &gcommNonFiniteReport_t::nonfinite_steps)
      .field("source_rank", &gcommNonFiniteReport_t::source_rank)
      .field("source_grad", &gcommNonFiniteReport_t::source_grad)
      .field("source_steps", &gcommNonFiniteReport_t::source_steps)
      .field("alone_steps", &gcommNonFiniteReport_t::alone_steps);

  gcommMembershipStats_t ms = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
  StructBinding<gcommMembershipStats_t>(m, "MembershipStats", ms)
      .field("generations", &gcommMembershipStats_t::generations)
      .field("failures_survived", &gcommMembershipStats_t::failures_survived)
      .field("steps_committed", &gcommMembershipStats_t::steps_committed)
      .field("steps_discarded", &gcommMembershipStats_t::steps_discarded)
      .field("recovery_s", &gcommMembershipStats_t::recovery_s)
      .field("state_bytes_sent", &gcommMembershipStats_t::state_bytes_sent)
      .field("state_bytes_received", &gcommMembershipStats_t::state_bytes_received)
      .field("state_sync_s", &gcommMembershipStats_t::state_sync_s);

  StructBinding<gcommMembershipView_t>(m, "MembershipView", gcommMembershipView_t{})
      .field("generation", &gcommMembershipView_t::generation)
      .field("rank", &gcommMembershipView_t::rank)
      .field("world_size", &gcommMembershipView_t::world_size)
      .field("changed", &gcommMembershipView_t::changed)
      .field("holders", &gcommMembershipView_t::holders)
      .field("committed_steps", &gcommMembershipView_t::committed_steps);

  StructBinding<gcommShardPiece_t>(m, "ShardPiece", gcommShardPiece_t{})
      .field("grad", &gcommShardPiece_t::grad)
      .field("grad_offset", &gcommShardPiece_t::grad_offset)
      .field("count", &gcommShardPiece_t::count)
      .field("shard_offset", &gcommShardPiece_t::shard_offset);

  StructBinding<gcommTensor_t>(m, "Tensor", gcommTensor_t{nullptr, 0, gcommFloat32})
      .property(
          "data", [](const gcommTensor_t& t) { return from_ptr(t.data); },
          [](gcommTensor_t& t, Ptr p) { t.data = to_ptr(p); })
      .field("count", &gcommTensor_t::count)
      .field("dtype", &gcommTensor_t::dtype);
}

void bind_enums(nb::module_& m) {
  nb::enum_<gcommStatus_t>(m, "Status", nb::is_arithmetic())
      .value("Success", gcommSuccess)
      .value("InvalidArgument", gcommInvalidArgument)
      .value("InvalidState", gcommInvalidState)
      .value("OutOfMemory", gcommOutOfMemory)
      .value("CudaError", gcommCudaError)
      .value("NcclError", gcommNcclError)
      .value("Timeout", gcommTimeout)
      .value("RemoteError", gcommRemoteError)
      .value("Aborted", gcommAborted)
      .value("NotSupported", gcommNotSupported)
      .value("InternalError", gcommInternalError);
  nb::enum_<gcommDataType_t>(m, "DataType", nb::is_arithmetic())
      .value("Float32", gcommFloat32)
      .value("Float16", gcommFloat16)
      .value("Bfloat16", gcommBfloat16);
  nb::enum_<gcommDeviceKind_t>(m, "DeviceKind", nb::is_arithmetic())
      .value("Host", gcommDeviceHost)
      .value("Cuda", gcommDeviceCuda);
  nb::enum_<gcommRedOp_t>(m, "RedOp", nb::is_arithmetic())
      .value("Sum", gcommSum)
      .value("Avg", gcommAvg)
      .value("Max", gcommMax)
      .value("Min", gcommMin);
  nb::enum_<gcommTransport_t>(m, "Transport", nb::is_arithmetic())
      .value("Auto", gcommTransportAuto)
      .value("Nccl", gcommTransportNccl)
      .value("Local", gcommTransportLocal)
      .value("Socket", gcommTransportSocket)
      .value("Mpi", gcommTransportMpi)
      .value("Shm", gcommTransportShm)
      .value("CudaIpc", gcommTransportCudaIpc);
  nb::enum_<gcommMemoryKind_t>(m, "MemoryKind", nb::is_arithmetic())
      .value("Default", gcommMemoryDefault)
      .value("Device", gcommMemoryDevice)
      .value("PinnedHost", gcommMemoryPinnedHost)
      .value("Host", gcommMemoryHost);
  m.attr("UNUSED_ERROR") = static_cast<int>(gcommUnusedError);
  m.attr("UNUSED_AS_ZERO") = static_cast<int>(gcommUnusedAsZero);
  m.attr("MODE_ALL_REDUCE") = static_cast<int>(gcommReducerAllReduce);
  m.attr("MODE_SHARDED") = static_cast<int>(gcommReducerSharded);
  m.attr("WIRE_SAME_AS_GRAD") = GCOMM_WIRE_SAME_AS_GRAD;
  m.attr("ALL_BUCKETS") = GCOMM_ALL_BUCKETS;
  m.attr("VERSION_CODE") = GCOMM_VERSION_CODE;
  m.attr("MAX_TENSORS") = GCOMM_MAX_TENSORS;
}

using Release = nb::call_guard<nb::gil_scoped_release>;

void bind_core(nb::module_& m) {
  m.def("_set_error_factory", [](nb::object f) { error_factory() = std::move(f); });
  m.def("version_string", [] { return std::string(gcommGetVersionString()); });
  m.def("version", [] {
    int v = 0;
    check(gcommGetVersion(&v));
    return v;
  });
  m.def("status_name", [](int s) { return std::string(gcommGetStatusName(static_cast<gcommStatus_t>(s))); });
  m.def("status_string",
        [](int s) { return std::string(gcommGetStatusString(static_cast<gcommStatus_t>(s))); });
  m.def("data_type_name",
        [](int d) { return std::string(gcommDataTypeName(static_cast<gcommDataType_t>(d))); });
  m.def("cuda_device_count", [] {
    int n = 0;
    check(gcommGetCudaDeviceCount(&n));
    return n;
  });
  m.def("nccl_version", [] {
    int built = 0, loaded = 0;
    check(gcommGetNcclVersion(&built, &loaded));
    return std::make_tuple(built, loaded);
  });
  m.def("environment_report", [] {
    return read_string([](char* b, size_t n, size_t* r) { return gcommGetEnvironmentReport(b, n, r); });
  });
  m.def("environment_json", [] {
    return read_string([](char* b, size_t n, size_t* r) { return gcommGetEnvironmentJson(b, n, r); });
  });
  m.def("set_log_level", [](int level) {
    gcommLogConfig_t c = GCOMM_LOG_CONFIG_INITIALIZER;
    c.level = static_cast<gcommLogLevel_t>(level);
    check(gcommSetLogConfig(&c));
  });
  m.def("launcher_rank", [] {
    int rank = -1, world = 0;
    check(gcommGetLauncherRank(&rank, &world));
    return std::make_tuple(rank, world);
  });
  // A view of memory gradcomm owns (bucket-view gradients, the scaler's scalars)
  // as a tensor of `framework` ("torch" or "numpy"); `owner` stays alive with it.
  m.def("tensor_view",
        [](Ptr data, std::vector<size_t> shape, int dtype, int device_kind, int ordinal, nb::handle owner,
           const std::string& framework) -> nb::object {
          nb::dlpack::dtype dt{};
          switch (dtype) {
            case gcommFloat32:
              dt = nb::dtype<float>();
              break;
            case gcommFloat16:
              dt = {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
              break;
            case gcommBfloat16:
              dt = {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
              break;
            case 100:
              dt = nb::dtype<int32_t>();
              break;  // the scaler's skipped flag
            default:
              throw nb::value_error("tensor_view: unknown dtype");
          }
          int dev = device_kind == gcommDeviceCuda ? nb::device::cuda::value : nb::device::cpu::value;
          int id = device_kind == gcommDeviceCuda ? ordinal : 0;
          if (framework == "torch")
            return nb::cast(nb::ndarray<nb::pytorch>(to_ptr(data), shape.size(), shape.data(), owner, nullptr,
                                                     dt, dev, id));
          return nb::cast(
              nb::ndarray<nb::numpy>(to_ptr(data), shape.size(), shape.data(), owner, nullptr, dt, dev, id));
        });
}

// All-gather and all-to-all: (comm, send, recv, count per block, dtype, stream).
using BlockwiseCall = gcommStatus_t (*)(gcommComm_t, const void*, void*, size_t, gcommDataType_t,
                                        gcommStream_t);
void bind_blockwise(nb::module_& m, const char* name, BlockwiseCall call) {
  m.def(
      name,
      [call](Ptr h, Ptr send, Ptr recv, size_t count, int dt, Ptr stream) {
        check(call(reinterpret_cast<gcommComm_t>(h), to_ptr(send), to_ptr(recv), count,
                   static_cast<gcommDataType_t>(dt), to_stream(stream)));
      },
      Release());
}

void bind_comm(nb::module_& m) {
  m.def(
      "comm_init_from_env",
      [](const CommConfig& c) {
        gcommCommConfig_t r = c.resolved();
        gcommComm_t h = nullptr;
        check(gcommCommInitFromEnv(&r, &h));
        return from_ptr(h);
      },
      Release());
  m.def(
      "comm_init",
      [](const CommConfig& c) {
        gcommCommConfig_t r = c.resolved();
        gcommComm_t h = nullptr;
        check(gcommCommInit(&r, &h));
        return from_ptr(h);
      },
      Release());
  m.def(
      "comm_init_local",
      [](int n, gcommDevice_t device, const CommConfig& c) {
        if (n < 1 || n > 4096)
          throw ApiError{gcommInvalidArgument, "nranks must be in 1 .. 4096, not " + std::to_string(n)};
        gcommCommConfig_t r = c.resolved();
        std::vector<gcommComm_t> hs(static_cast<size_t>(n));
        check(gcommCommInitLocal(n, device, &r, hs.data()));
        std::vector<Ptr> out;
        for (gcommComm_t h : hs) out.push_back(from_ptr(h));
        return out;
      },
      Release());
  m.def(
      "comm_destroy", [](Ptr h) { check(gcommCommDestroy(reinterpret_cast<gcommComm_t>(h))); }, Release());
  m.def("comm_abort", [](Ptr h) { check(gcommCommAbort(reinterpret_cast<gcommComm_t>(h))); });
  m.def("comm_rank", [](Ptr h) {
    int v = 0;
    check(gcommCommRank(reinterpret_cast<gcommComm_t>(h), &v));
    return v;
  });
  m.def("comm_size", [](Ptr h) {
    int v = 0;
    check(gcommCommSize(reinterpret_cast<gcommComm_t>(h), &v));
    return v;
  });
  m.def("comm_device", [](Ptr h) {
    gcommDevice_t d{};
    check(gcommCommDevice(reinterpret_cast<gcommComm_t>(h), &d));
    return d;
  });
  m.def("comm_transport", [](Ptr h) {
    gcommTransport_t t{};
    check(gcommCommTransport(reinterpret_cast<gcommComm_t>(h), &t));
    return t;
  });
  m.def("comm_bytes_sent", [](Ptr h) {
    uint64_t v = 0;
    check(gcommCommBytesSent(reinterpret_cast<gcommComm_t>(h), &v));
    return v;
  });
  m.def("comm_flight_record", [](Ptr h) {
    return read_string([h](char* b, size_t n, size_t* r) {
      return gcommCommGetFlightRecord(reinterpret_cast<gcommComm_t>(h), b, n, r);
    });
  });
  m.def(
      "comm_dump_flight_record",
      [](Ptr h, std::optional<std::string> path) {
        check(gcommCommDumpFlightRecord(reinterpret_cast<gcommComm_t>(h), path ? path->c_str() : nullptr));
      },
      nb::arg("handle"), nb::arg("path").none());
  m.def("comm_async_error", [](Ptr h) {
    gcommStatus_t s = gcommSuccess;
    check(gcommCommGetAsyncError(reinterpret_cast<gcommComm_t>(h), &s));
    if (s != gcommSuccess) throw ApiError{s, gcommGetLastError()};
  });
  m.def(
      "comm_synchronize", [](Ptr h) { check(gcommCommSynchronize(reinterpret_cast<gcommComm_t>(h))); },
      Release());
  m.def(
      "all_reduce",
      [](Ptr h, Ptr send, Ptr recv, size_t count, int dt, int op, Ptr stream) {
        check(gcommAllReduce(reinterpret_cast<gcommComm_t>(h), to_ptr(send), to_ptr(recv), count,
                             static_cast<gcommDataType_t>(dt), static_cast<gcommRedOp_t>(op),
                             to_stream(stream)));
      },
      Release());
  m.def(
      "broadcast",
      [](Ptr h, Ptr send, Ptr recv, size_t count, int dt, int root, Ptr stream) {
        check(gcommBroadcast(reinterpret_cast<gcommComm_t>(h), to_ptr(send), to_ptr(recv), count,
                             static_cast<gcommDataType_t>(dt), root, to_stream(stream)));
      },
      Release());
  bind_blockwise(m, "all_gather", gcommAllGather);
  m.def(
      "reduce_scatter",
      [](Ptr h, Ptr send, Ptr recv, size_t count, int dt, int op, Ptr stream) {
        check(gcommReduceScatter(reinterpret_cast<gcommComm_t>(h), to_ptr(send), to_ptr(recv), count,
                                 static_cast<gcommDataType_t>(dt), static_cast<gcommRedOp_t>(op),
                                 to_stream(stream)));
      },
      Release());
  bind_blockwise(m, "all_to_all", gcommAllToAll);
  m.def(
      "send",
      [](Ptr h, Ptr buf, size_t count, int dt, int peer, Ptr stream) {
        check(gcommSend(reinterpret_cast<gcommComm_t>(h), to_ptr(buf), count,
                        static_cast<gcommDataType_t>(dt), peer, to_stream(stream)));
      },
      Release());
  m.def(
      "recv",
      [](Ptr h, Ptr buf, size_t count, int dt, int peer, Ptr stream) {
        check(gcommRecv(reinterpret_cast<gcommComm_t>(h), to_ptr(buf), count,
                        static_cast<gcommDataType_t>(dt), peer, to_stream(stream)));
      },
      Release());
  m.def("group_start", [] { check(gcommGroupStart()); });
  m.def(
      "group_end", [] { check(gcommGroupEnd()); }, Release());
  m.def(
      "barrier",
      [](Ptr h, Ptr stream) { check(gcommBarrier(reinterpret_cast<gcommComm_t>(h), to_stream(stream))); },
      Release());
  // (first span off the majority per rank, -1: none; spans some rank disagrees on)
  m.def(
      "check_divergence",
      [](Ptr h, const std::vector<Ptr>& data, const std::vector<size_t>& bytes, Ptr stream) {
        if (data.size() != bytes.size())
          throw ApiError{gcommInvalidArgument, "check_divergence: data and bytes differ in length"};
        int size = 0;
        check(gcommCommSize(reinterpret_cast<gcommComm_t>(h), &size));
        std::vector<const void*> spans;
        for (Ptr p : data) spans.push_back(to_ptr(p));
        std::vector<int64_t> first(static_cast<size_t>(size), -1);
        size_t mismatched = 0;
        check(gcommCommCheckDivergence(reinterpret_cast<gcommComm_t>(h), spans.data(), bytes.data(),
                                       spans.size(), to_stream(stream), first.data(), &mismatched));
        return std::make_tuple(first, mismatched);
      },
      Release());
}

gcommReducer_t R(Ptr h) {
  return reinterpret_cast<gcommReducer_t>(h);
}

void bind_reducer(nb::module_& m) {
  m.def(
      "reducer_create",
      [](Ptr comm, const std::vector<TensorTuple>& grads, const gcommReducerConfig_t& config) {
        std::vector<gcommTensor_t> t = to_tensors(grads);
        gcommReducer_t h = nullptr;
        check(gcommReducerCreate(reinterpret_cast<gcommComm_t>(comm), t.data(), t.size(), &config, &h));
        return from_ptr(h);
      },
      Release());
  m.def(
      "reducer_destroy", [](Ptr h) { check(gcommReducerDestroy(R(h))); }, Release());
  m.def(
      "reducer_begin_step", [](Ptr h, int sync) { check(gcommReducerBeginStep(R(h), sync)); }, Release());
  m.def(
      "reducer_mark_ready",
      [](Ptr h, size_t i, Ptr stream) { check(gcommReducerMarkReady(R(h), i, to_stream(stream))); },
      Release());
  m.def(
      "reducer_mark_ready_at",
      [](Ptr h, size_t i, Ptr data, Ptr stream) {
        check(gcommReducerMarkReadyAt(R(h), i, to_ptr(data), to_stream(stream)));
      },
      Release());
  // Returns the skip flag when want_skip (this synchronizes the stream), else None.
  m.def("reducer_finalize", [](Ptr h, Ptr stream, bool want_skip) -> nb::object {
    int skip = 0;
    gcommStatus_t s;
    {
      nb::gil_scoped_release release;
      s = gcommReducerFinalize(R(h), to_stream(stream), want_skip ? &skip : nullptr);
    }
    check(s);
    return want_skip ? nb::object(nb::bool_(skip != 0)) : nb::none();
  });
  m.def("reducer_found_inf", [](Ptr h) {
    const float* f = nullptr;
    check(gcommReducerFoundInf(R(h), &f));
    return from_ptr(f);
  });
  m.def(
      "reducer_grad_norm",
      [](Ptr h, Ptr stream) {
        const float* n = nullptr;
        check(gcommReducerGradNorm(R(h), to_stream(stream), &n));
        return from_ptr(n);
      },
      Release());
  m.def(
      "reducer_clip_grad_norm",
      [](Ptr h, float max_norm, Ptr stream) {
        const float* n = nullptr;
        check(gcommReducerClipGradNorm(R(h), max_norm, to_stream(stream), &n));
        return from_ptr(n);
      },
      Release());
  m.def("reducer_grad_data", [](Ptr h, size_t i) {
    void* p = nullptr;
    check(gcommReducerGradData(R(h), i, &p));
    return from_ptr(p);
  });
  m.def("reducer_set_grad_data",
        [](Ptr h, size_t i, Ptr p) { check(gcommReducerSetGradData(R(h), i, to_ptr(p))); });
  m.def("reducer_set_all_grad_data", [](Ptr h, const std::vector<Ptr>& ptrs) {
    std::vector<void*> v;
    for (Ptr p : ptrs) v.push_back(to_ptr(p));
    check(gcommReducerSetAllGradData(R(h), v.data(), v.size()));
  });
  m.def(
      "reducer_stats",
      [](Ptr h) {
        gcommReducerStats_t s{};
        check(gcommReducerGetStats(R(h), &s));
        return s;
      },
      Release());  // may wait for the communicator's lane (and, through it, for other ranks)
  m.def("reducer_set_timing", [](Ptr h, bool on) { check(gcommReducerSetTiming(R(h), on ? 1 : 0)); });
  m.def(
      "reducer_bucket_autotune",
      [](Ptr h) {
        gcommBucketAutotuneReport_t r = GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER;
        check(gcommReducerGetBucketAutotune(R(h), &r));
        return r;
      },
      Release());
  m.def(
      "reducer_step_timing",
      [](Ptr h) {
        gcommReducerStepTiming_t t = GCOMM_REDUCER_STEP_TIMING_INITIALIZER;
        check(gcommReducerGetStepTiming(R(h), &t));
        return t;
      },
      Release());
  // These take the reducer's lock, which a finalize holds through its collectives.
  m.def(
      "reducer_note_step_mark",
      [](Ptr h, int mark) { check(gcommReducerNoteStepMark(R(h), static_cast<gcommStepMark_t>(mark))); },
      Release());
  m.def(
      "reducer_straggler_report",
      [](Ptr h) {
        gcommStragglerReport_t r = GCOMM_STRAGGLER_REPORT_INITIALIZER;
        check(gcommReducerGetStragglerReport(R(h), &r));
        return r;
      },
      Release());
  m.def(
      "reducer_nonfinite_report",
      [](Ptr h) {
        gcommNonFiniteReport_t r = GCOMM_NONFINITE_REPORT_INITIALIZER;
        check(gcommReducerGetNonFiniteReport(R(h), &r));
        return r;
      },
      Release());
  m.def(
      "reducer_start_trace",
      [](Ptr h, const std::string& path, uint64_t steps) {
        check(gcommReducerStartTrace(R(h), path.c_str(), steps));
      },
      Release());
  m.def(
      "reducer_stop_trace", [](Ptr h) { check(gcommReducerStopTrace(R(h))); }, Release());
  m.def("reducer_describe", [](Ptr h) {
    return read_string([h](char* b, size_t n, size_t* r) { return gcommReducerDescribe(R(h), b, n, r); });
  });
  // Compression goes by its text form and comes back as JSON: the package names
  // no strategy, so a new one needs no binding (reducer/compressions.hpp).
  m.def(
      "reducer_enable_compression",
      [](Ptr h, const std::string& spec, std::optional<std::vector<size_t>> rows) {
        check(gcommReducerEnableCompressionText(R(h), spec.c_str(), rows ? rows->data() : nullptr));
      },
      Release());
  m.def(
      "reducer_describe_compression",
      [](Ptr h) {
        return read_string(
            [h](char* b, size_t n, size_t* r) { return gcommReducerDescribeCompression(R(h), b, n, r); });
      },
      Release());  // may wait for the communicator's lane (and, through it, for other ranks)
  m.def(
      "reducer_save_compression_state",
      [](Ptr h, bool shared) {
        const auto part = shared ? gcommCompressionStateShared : gcommCompressionStateAll;
        return read_bytes([h, part](char* b, size_t n, size_t* r) {
          return gcommReducerSaveCompressionStatePart(R(h), part, b, n, r);
        });
      },
      "handle"_a, "shared"_a = false);
  m.def(
      "reducer_load_compression_state",
      [](Ptr h, nb::bytes data, bool carry) {
        check(carry ? gcommReducerCarryCompressionState(R(h), data.c_str(), data.size())
                    : gcommReducerLoadCompressionState(R(h), data.c_str(), data.size()));
      },
      "handle"_a, "data"_a, "carry"_a = false);
  m.def("reducer_get_shard", [](Ptr h, size_t bucket) {
    gcommTensor_t shard{};
    size_t n = 0;
    check(gcommReducerGetShard(R(h), bucket, &shard, nullptr, 0, &n));
    std::vector<gcommShardPiece_t> pieces(n);
    check(gcommReducerGetShard(R(h), bucket, &shard, pieces.data(), n, &n));
    pieces.resize(n);
    return std::make_tuple(shard, pieces);
  });
  m.def("reducer_set_params", [](Ptr h, const std::vector<TensorTuple>& params) {
    std::vector<gcommTensor_t> t = to_tensors(params);
    check(gcommReducerSetParams(R(h), t.data(), t.size()));
  });
  m.def(
      "reducer_all_gather_params",
      [](Ptr h, size_t bucket, Ptr stream) {
        check(gcommReducerAllGatherParams(R(h), bucket, to_stream(stream)));
      },
      Release());
}

gcommGradScaler_t S(Ptr h) {
  return reinterpret_cast<gcommGradScaler_t>(h);
}

void bind_scaler(nb::module_& m) {
  m.def("scaler_create", [](gcommDevice_t device, const gcommGradScalerConfig_t& c) {
    gcommGradScaler_t h = nullptr;
    check(gcommGradScalerCreate(device, &c, &h));
    return from_ptr(h);
  });
  m.def("scaler_destroy", [](Ptr h) { check(gcommGradScalerDestroy(S(h))); });
  m.def("scaler_unscale", [](Ptr h, const std::vector<TensorTuple>& grads, Ptr stream) {
    std::vector<gcommTensor_t> t = to_tensors(grads);
    check(gcommGradScalerUnscale(S(h), t.data(), t.size(), to_stream(stream)));
  });
  m.def("scaler_update", [](Ptr h, Ptr stream) { check(gcommGradScalerUpdate(S(h), to_stream(stream))); });
  m.def("scaler_device_state", [](Ptr h) {
    const float *scale = nullptr, *inv = nullptr;
    float* found = nullptr;
    const int32_t* skipped = nullptr;
    check(gcommGradScalerDeviceState(S(h), &scale, &inv, &found, &skipped));
    return std::make_tuple(from_ptr(scale), from_ptr(inv), from_ptr(found), from_ptr(skipped));
  });
  m.def(
      "scaler_get_state",
      [](Ptr h, Ptr stream) {
        gcommGradScalerState_t s{};
        check(gcommGradScalerGetState(S(h), to_stream(stream), &s));
        return s;
      },
      Release());
  m.def(
      "scaler_set_state",
      [](Ptr h, const gcommGradScalerState_t& s, Ptr stream) {
        check(gcommGradScalerSetState(S(h), &s, to_stream(stream)));
      },
      Release());
}

gcommAllocator_t A(Ptr h) {
  return reinterpret_cast<gcommAllocator_t>(h);
}

void bind_allocator(nb::module_& m) {
  m.def("allocator_create", [](gcommDevice_t device, const gcommAllocatorConfig_t& c) {
    gcommAllocator_t h = nullptr;
    check(gcommAllocatorCreate(device, &c, &h));
    return from_ptr(h);
  });
  m.def("allocator_destroy", [](Ptr h) { check(gcommAllocatorDestroy(A(h))); });
  m.def("allocator_malloc", [](Ptr h, size_t bytes, Ptr stream) {
    void* p = nullptr;
    check(gcommAllocatorMalloc(A(h), bytes, to_stream(stream), &p));
    return from_ptr(p);
  });
  m.def("allocator_free",
        [](Ptr h, Ptr p, Ptr stream) { check(gcommAllocatorFree(A(h), to_ptr(p), to_stream(stream))); });
  m.def("allocator_stats", [](Ptr h) {
    gcommAllocatorStats_t s = GCOMM_ALLOCATOR_STATS_INITIALIZER;
    check(gcommAllocatorGetStats(A(h), &s));
    return s;
  });
  m.def("allocator_summary", [](Ptr h) {
    return read_string([h](char* b, size_t n, size_t* r) { return gcommAllocatorGetSummary(A(h), b, n, r); });
  });
  m.def("allocator_release_cached", [](Ptr h) { check(gcommAllocatorReleaseCached(A(h))); });
  m.def("allocator_reset_peak_stats", [](Ptr h) { check(gcommAllocatorResetPeakStats(A(h))); });
}

// ---- outer synchronization ----------------------------------------------------

gcommOuterSync_t O(Ptr h) {
  return reinterpret_cast<gcommOuterSync_t>(h);
}

void bind_outer_sync(nb::module_& m) {
  m.def(
      "outer_sync_create",
      [](Ptr comm, const std::vector<TensorTuple>& params, uint32_t sync_every, uint32_t fragments,
         float outer_lr, float outer_momentum, int nesterov, int wire_dtype,
         const std::optional<std::string>& compression, size_t bucket_cap_bytes, uint32_t overlap_steps,
         float mix) {
        std::vector<gcommTensor_t> t = to_tensors(params);
        gcommOuterSyncConfig_t c = GCOMM_OUTER_SYNC_CONFIG_INITIALIZER;
        c.sync_every = sync_every;
        c.fragments = fragments;
        c.outer_lr = outer_lr;
        c.outer_momentum = outer_momentum;
        c.nesterov = nesterov;
        c.wire_dtype = wire_dtype;
        c.compression = compression ? compression->c_str() : nullptr;
        c.bucket_cap_bytes = bucket_cap_bytes;
        c.overlap_steps = overlap_steps;
        c.mix = mix;
        gcommOuterSync_t h = nullptr;
        check(gcommOuterSyncCreate(reinterpret_cast<gcommComm_t>(comm), t.data(), t.size(), &c, &h));
        return from_ptr(h);
      },
      // One argument per field of gcommOuterSyncConfig_t (test_bindings.py checks the names).
      nb::arg("comm"), nb::arg("params"), nb::arg("sync_every"), nb::arg("fragments"), nb::arg("outer_lr"),
      nb::arg("outer_momentum"), nb::arg("nesterov"), nb::arg("wire_dtype"), nb::arg("compression").none(),
      nb::arg("bucket_cap_bytes"), nb::arg("overlap_steps") = 0, nb::arg("mix") = 0.5f, Release());
  m.def(
      "outer_sync_destroy", [](Ptr h) { check(gcommOuterSyncDestroy(O(h))); }, Release());
  m.def(
      "outer_sync_step",
      [](Ptr h, Ptr stream) {
        int synced = 0;
        check(gcommOuterSyncStep(O(h), to_stream(stream), &synced));
        return synced;
      },
      Release());
  // The stats struct's counters as a dict named as its fields.
  m.def("outer_sync_stats", [](Ptr h) {
    gcommOuterSyncStats_t s = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
    check(gcommOuterSyncGetStats(O(h), &s));
    nb::dict d;
    d["inner_steps"] = s.inner_steps;
    d["syncs"] = s.syncs;
    d["skipped_syncs"] = s.skipped_syncs;
    d["values"] = s.values;
    d["bytes_sent"] = s.bytes_sent;
    return d;
  });
  m.def("outer_sync_save_state", [](Ptr h) {
    size_t need = 0;
    check(gcommOuterSyncSaveState(O(h), nullptr, 0, &need));
    std::string out(need, '\0');
    if (need > 0) check(gcommOuterSyncSaveState(O(h), out.data(), out.size(), &need));
    return nb::bytes(out.data(), out.size());
  });
  m.def("outer_sync_load_state", [](Ptr h, nb::bytes data) {
    const std::string copy(data.c_str(), data.size());
    nb::gil_scoped_release release;
    check(gcommOuterSyncLoadState(O(h), copy.data(), copy.size()));
  });
}

}  // namespace

// Fault-tolerant jobs (include/gradcomm/membership.h; gradcomm/membership.py).
gcommMembership_t M(Ptr h) {
  return reinterpret_cast<gcommMembership_t>(h);
}

void bind_membership(nb::module_& m) {
  m.def(
      "store_server_start",
      [](const std::optional<std::string>& host, int port) {
        gcommStoreServer_t s = nullptr;
        check(gcommStoreServerStart(host ? host->c_str() : nullptr, port, &s));
        return from_ptr(s);
      },
      Release());
  m.def("store_server_port", [](Ptr h) {
    int port = 0;
    check(gcommStoreServerPort(reinterpret_cast<gcommStoreServer_t>(h), &port));
    return port;
  });
  m.def(
      "store_server_stop",
      [](Ptr h) { check(gcommStoreServerStop(reinterpret_cast<gcommStoreServer_t>(h))); }, Release());
  m.def(
      "membership_join",
      [](const std::optional<std::string>& store, const std::optional<std::string>& job_key,
         const std::optional<std::string>& name, int min_ranks, double quorum_timeout_s, double timeout_s,
         gcommDevice_t device, gcommTransport_t transport) {
        gcommMembershipConfig_t c = GCOMM_MEMBERSHIP_CONFIG_INITIALIZER;
        c.store = store ? store->c_str() : nullptr;
        c.job_key = job_key ? job_key->c_str() : nullptr;
        c.name = name ? name->c_str() : nullptr;
        c.min_ranks = min_ranks;
        c.quorum_timeout_s = quorum_timeout_s;
        c.timeout_s = timeout_s;
        c.device = device;
        c.transport = transport;
        gcommMembership_t h = nullptr;
        check(gcommMembershipJoin(&c, &h));
        return from_ptr(h);
      },
      // One argument per field of gcommMembershipConfig_t (test_bindings.py checks the names).
      nb::arg("store").none(), nb::arg("job_key").none(), nb::arg("name").none(), nb::arg("min_ranks"),
      nb::arg("quorum_timeout_s"), nb::arg("timeout_s"), nb::arg("device"), nb::arg("transport"), Release());
  // (communicator handle, MembershipView)
  m.def(
      "membership_quorum",
      [](Ptr h) {
        gcommComm_t comm = nullptr;
        gcommMembershipView_t v{};
        check(gcommMembershipQuorum(M(h), &comm, &v));
        return std::make_tuple(from_ptr(comm), v);
      },
      Release());
  m.def(
      "membership_commit",
      [](Ptr h, bool ok, const std::optional<std::string>& why) {
        int committed = 0;
        check(gcommMembershipCommit(M(h), ok ? 1 : 0, why ? why->c_str() : nullptr, &committed));
        return committed != 0;
      },
      Release());
  m.def("membership_change_pending", [](Ptr h) {
    int pending = 0;
    check(gcommMembershipChangePending(M(h), &pending));
    return pending != 0;
  });
  m.def(
      "membership_sync_state",
      [](Ptr h, const std::vector<Ptr>& data, const std::vector<size_t>& bytes, Ptr stream) {
        if (data.size() != bytes.size())
          throw ApiError{gcommInvalidArgument, "membership_sync_state: data and bytes differ in length"};
        std::vector<void*> spans;
        for (Ptr p : data) spans.push_back(to_ptr(p));
        check(gcommMembershipSyncState(M(h), spans.data(), bytes.data(), spans.size(), to_stream(stream)));
      },
      Release());
  m.def("membership_change", [](Ptr h) {
    size_t required = 0;
    check(gcommMembershipGetChange(M(h), nullptr, 0, &required));
    std::string text(required, '\0');
    check(gcommMembershipGetChange(M(h), text.data(), text.size(), nullptr));
    text.resize(required - 1);
    return text;
  });
  m.def("membership_stats", [](Ptr h) {
    gcommMembershipStats_t s = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
    check(gcommMembershipGetStats(M(h), &s));
    return s;
  });
  m.def(
      "membership_leave", [](Ptr h) { check(gcommMembershipLeave(M(h))); }, Release());
}

NB_MODULE(_gradcomm, m) {
  m.doc() = "gradcomm's C API (use the gradcomm package, not this module)";
  // Objects still alive when the interpreter exits (a communicator in a global)
  // are not leaks of the binding; nanobind's report would only alarm users.
  nb::set_leak_warnings(false);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ApiError& e) {
      nb::object factory = error_factory();
      if (!factory.is_valid()) {
        PyErr_SetString(PyExc_RuntimeError, e.message.c_str());
        return;
      }
      nb::object exc = factory(static_cast<int>(e.status), gcommGetStatusName(e.status), e.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  bind_enums(m);
  bind_structs(m);
  bind_core(m);
  bind_comm(m);
  bind_reducer(m);
  bind_scaler(m);
  bind_allocator(m);
  bind_membership(m);
  bind_outer_sync(m);
}
