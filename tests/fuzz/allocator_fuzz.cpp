// Fuzz target: the caching allocator driven by a random op sequence (allocate,
// free on any stream, double free, foreign free, record_stream, streams
// advancing, release-cached, reset-peak, injected upstream failures) over a
// virtual upstream and manual events, checked against a model after every op:
// live blocks never overlap and lie inside upstream memory, the allocator's live
// count matches, and at the end everything goes back to the upstream.
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/testing/manual_event_source.hpp"
#include "memory/testing/test_upstreams.hpp"

using namespace gradcomm;
using namespace gradcomm::memory;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

gcommStream_t stream_of(uint8_t b) {
  return reinterpret_cast<gcommStream_t>(uintptr_t{0x100} * (1 + b % 3));
}

size_t size_of(fuzz::Input& in) {
  uint8_t scale = in.byte() % 4;
  uint32_t raw = in.take<uint32_t>();
  switch (scale) {
    case 0:
      return raw % 4096;  // small pool, including 0
    case 1:
      return raw % (1u << 20);  // up to 1 MiB
    case 2:
      return raw % (64u << 20);  // up to 64 MiB
    default:
      return raw % (512u << 20);  // up to 512 MiB
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  VirtualUpstream virtual_upstream(size_t{4} << 30);
  FaultInjectingUpstream upstream(virtual_upstream);
  ManualEventSource events;
  AllocatorOptions options;
  uint8_t opts = in.byte();
  if (opts & 1) options.max_split_size = size_t{32} << 20;
  if (opts & 2) options.pool_limit = size_t{1} << 30;
  if (opts & 4) options.release_threshold = size_t{64} << 20;
  {
    CachingAllocator alloc(upstream, events, options);
    std::map<uintptr_t, size_t> live;  // address -> requested bytes
    std::vector<uintptr_t> freed;      // recently freed addresses (for double frees)

    for (int step = 0; step < 512 && !in.empty(); ++step) {
      uint8_t op = in.byte();
      gcommStream_t stream = stream_of(in.byte());
      try {
        switch (op % 9) {
          case 0:
          case 1:
          case 2: {
            size_t bytes = size_of(in);
            void* p = alloc.allocate(bytes, stream);
            if (bytes == 0) {
              check(p == nullptr);
              break;
            }
            uintptr_t a = reinterpret_cast<uintptr_t>(p);
            check(virtual_upstream.owns(p, bytes));
            auto next = live.lower_bound(a);
            if (next != live.end()) check(next->first >= a + bytes);
            if (next != live.begin()) check(std::prev(next)->first + std::prev(next)->second <= a);
            live[a] = bytes;
            break;
          }
          case 3:
          case 4: {
            if (live.empty()) break;
            auto it = std::next(live.begin(), in.byte() % live.size());
            alloc.deallocate(reinterpret_cast<void*>(it->first), stream);
            freed.push_back(it->first);
            live.erase(it);
            break;
          }
          case 5: {  // double free / foreign pointer: must be refused, changing nothing
            uintptr_t a = freed.empty() || (op & 0x10) ? uintptr_t{0xdead0000} : freed.back();
            if (live.count(a)) break;
            size_t before = alloc.live_blocks();
            bool refused = false;
            try {
              alloc.deallocate(reinterpret_cast<void*>(a), stream);
            } catch (const Error& e) {
              refused = e.status() == gcommInvalidArgument;
            }
            check(refused && alloc.live_blocks() == before);
            break;
          }
          case 6:
            if (!live.empty()) alloc.record_stream(reinterpret_cast<void*>(live.begin()->first), stream);
            break;
          case 7:
            if (op & 0x10)
              events.complete_all();
            else
              events.complete_stream(stream);
            break;
          case 8:
            if (op & 0x10)
              alloc.release_cached();
            else if (op & 0x20)
              alloc.reset_peak_stats();
            else
              upstream.fail_after(in.byte() % 4, 1 + in.byte() % 2);
            break;
        }
      } catch (const Error& e) {
        // Only out-of-memory is an acceptable failure of a valid op.
        check(e.status() == gcommOutOfMemory);
      }
      check(alloc.live_blocks() == live.size());
      check(alloc.stats().requested_bytes.all().current <= alloc.stats().reserved_bytes.all().current);
    }
    upstream.disarm();
    for (auto& [a, bytes] : live) alloc.deallocate(reinterpret_cast<void*>(a), stream_of(0));
    events.complete_all();
    alloc.release_cached();
    check(alloc.live_blocks() == 0);
  }
  check(virtual_upstream.live_allocations() == 0);
  check(virtual_upstream.bad_deallocations() == 0);
  check(events.outstanding() == 0);
  return 0;
}
