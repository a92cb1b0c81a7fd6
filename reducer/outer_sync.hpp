// Outer synchronization (include/gradcomm/outer_sync.h, docs/outer-sync.md): the
// outer parameters and momentum of DiLoCo, kept in one flat f32 buffer each in the
// parameters' order, and one reducer per fragment that averages the fragment's
// pseudo-gradients (the wire, compression included, is the reducer's). Built on the
// reducer's C API: a fragment's sync is one synced reducer step over its
// pseudo-gradient buffer, between the outer step's two kernels
// (kernels/outer/outer_step.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gradcomm/outer_sync.h"
#include "kernels/ops.hpp"
#include "kernels/outer/outer_step.hpp"
#include "memory/caching_allocator.hpp"

namespace gradcomm::reducer {

// Which inner steps sync which fragment: fragment p of F syncs after inner steps
// phase(p) + k * H (k >= 0), phase(p) = (p + 1) * H / F, so the F syncs of a period
// are spread evenly over it and the last fragment syncs at step H. With an overlap
// of tau steps a sync started after step t lands after step t + tau: tau is at most
// H / F (rounded down), the fewest steps between two starts, so a fragment's sync has
// landed before the next one starts (on the same step, landing comes first).
struct OuterSchedule {
  uint32_t sync_every = 100;
  uint32_t fragments = 1;
  uint32_t overlap = 0;
  uint64_t phase(uint32_t p) const { return (static_cast<uint64_t>(p) + 1) * sync_every / fragments; }
  // The fragment due to start after inner step t (1-based), or -1.
  int due(uint64_t t) const;
  // Throws gcommInvalidArgument, naming the fields, for a schedule that cannot run.
  void check() const;
};

// The tensors [first, first + count) of each fragment: whole tensors in order,
// cut where the running count of values passes (p + 1) / F of the total; every
// fragment gets at least one tensor (refused when there are fewer than F).
std::vector<std::pair<size_t, size_t>> cut_fragments(const std::vector<size_t>& counts, uint32_t fragments);

class OuterSync {
 public:
  OuterSync(gcommComm_t comm, const gcommTensor_t* params, size_t n, const gcommOuterSyncConfig_t& config);
  ~OuterSync();
  OuterSync(const OuterSync&) = delete;
  OuterSync& operator=(const OuterSync&) = delete;

  // After an inner step: the number of fragments whose outer step it applied (0 or 1).
  int step(gcommStream_t stream);
  gcommOuterSyncStats_t stats() const;
  // Waits for a sync in flight's average (not its application) first.
  std::vector<uint8_t> save();
  void load(const uint8_t* data, size_t size);

 private:
  // Owned so that a constructor that fails part way frees what it made.
  struct ReducerDeleter {
    void operator()(gcommReducer* r) const noexcept;
  };
  struct Fragment {
    size_t first = 0, count = 0;    // tensors
    size_t offset = 0, values = 0;  // into the flat buffers
    std::unique_ptr<gcommReducer, ReducerDeleter> reducer;
    // A sync in flight: the inner step after which it lands (0: none), whether its
    // average is in delta_ already (its reducer step finalized), and whether that
    // average held Inf/NaN.
    uint64_t lands_at = 0;
    bool averaged = false, non_finite = false;
    bool counted = false;  // the transport counts bytes: sent_before is valid
    uint64_t sent_before = 0;
  };
  struct Buffer {  // an f32 buffer of the caching allocator
    memory::CachingAllocator* allocator = nullptr;
    float* data = nullptr;
    Buffer() = default;
    Buffer(memory::CachingAllocator& a, size_t values);
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();
  };
  // A sync's three parts: the pseudo-gradients taken and handed to the reducer; its
  // average waited for (the reducer's finalize); the outer step applied (or skipped).
  void start(Fragment& f, gcommStream_t stream);
  void average(Fragment& f, gcommStream_t stream);
  void land(Fragment& f, gcommStream_t stream);
  // Waits for the average of every sync in flight that has none yet (save).
  void average_in_flight();
  // The same, then drops them all (load, destroy).
  void drop_in_flight();
  // A fragment's compression state (empty without compression).
  std::vector<uint8_t> compression_state(const Fragment& f) const;
  // On a GPU, waits for the device: creation, save, load and destroy are ordered with
  // the caller's work on any stream (they are rare, and their copies use no stream of
  // the caller's).
  void settle() const;
  kernels::Target target(gcommStream_t stream) const;

  gcommComm_t comm_;
  gcommDevice_t device_{};
  OuterSchedule schedule_;
  kernels::outer::OuterRule rule_;
  std::vector<gcommTensor_t> params_;
  std::vector<size_t> offsets_;  // tensor k's first value in the flat buffers
  size_t values_ = 0;
  std::unique_ptr<memory::CachingAllocator> allocator_;  // declared before what it holds: freed last
  std::unique_ptr<Buffer> outer_, momentum_, delta_;
  std::vector<Fragment> fragments_;  // their reducers hold delta_: destroyed first
  std::string compression_;          // the text form, "" for none
  std::string wire_;                 // the pseudo-gradients' wire, as the state records it
  uint64_t inner_steps_ = 0, syncs_ = 0, skipped_ = 0, bytes_sent_ = 0;
};

}  // namespace gradcomm::reducer
