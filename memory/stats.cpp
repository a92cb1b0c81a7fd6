// Statistics: the C layout and the summary table.
#include "memory/stats.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "memory/size_classes.hpp"

namespace gradcomm {
namespace memory {

namespace {
void copy_stat(const Stat& in, gcommAllocatorStat_t* out) {
  out->current = in.current;
  out->peak = in.peak;
  out->total_allocated = in.total_allocated;
  out->total_freed = in.total_freed;
}

std::string row(const char* name, const Stat& s, bool bytes) {
  auto cell = [bytes](uint64_t v) { return bytes ? format_bytes(v) : std::to_string(v); };
  char line[128];
  std::snprintf(line, sizeof(line), "| %-24s | %11s | %11s | %11s | %11s |\n", name, cell(s.current).c_str(),
                cell(s.peak).c_str(), cell(s.total_allocated).c_str(), cell(s.total_freed).c_str());
  return line;
}

void rows(std::string& out, const char* name, const PoolStat& s, bool bytes) {
  out += row(name, s.pool[kAllPools], bytes);
  out += row("      from large pool", s.pool[kLargePool], bytes);
  out += row("      from small pool", s.pool[kSmallPool], bytes);
}

std::string counter_line(const char* name, uint64_t value) {
  char line[128];
  std::snprintf(line, sizeof(line), "| %-24s | %-53" PRIu64 " |\n", name, value);
  return line;
}

std::string text_line(const char* name, const std::string& value) {
  char line[160];
  std::snprintf(line, sizeof(line), "| %-24s | %-53s |\n", name, value.c_str());
  return line;
}

const std::string kRule = "|" + std::string(84, '-') + "|\n";
const std::string kDoubleRule = "|" + std::string(84, '=') + "|\n";
}  // namespace

void to_c_stats(const AllocatorStats& in, gcommAllocatorStats_t* out) {
  copy_stat(in.allocated_bytes.all(), &out->allocated_bytes);
  copy_stat(in.requested_bytes.all(), &out->requested_bytes);
  copy_stat(in.reserved_bytes.all(), &out->reserved_bytes);
  copy_stat(in.allocated_blocks.all(), &out->allocated_blocks);
  copy_stat(in.active_blocks.all(), &out->active_blocks);
  copy_stat(in.segments.all(), &out->segments);
  out->malloc_calls = in.malloc_calls;
  out->free_calls = in.free_calls;
  out->cache_hits = in.cache_hits;
  out->upstream_allocs = in.upstream_allocs;
  out->upstream_frees = in.upstream_frees;
  out->ooms = in.ooms;
  out->cache_flushes = in.cache_flushes;
  out->events_recorded = in.events_recorded;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

std::string format_summary(const AllocatorStats& s, const SummaryContext& c) {
  std::string out = kDoubleRule;
  char title[128];
  std::snprintf(title, sizeof(title), "gradcomm caching allocator: %s, %s", c.device.c_str(), c.kind.c_str());
  char line[256];
  std::snprintf(line, sizeof(line), "| %-82s |\n", title);
  out += line;
  out += kRule;
  std::snprintf(line, sizeof(line), "| %-24s | %11s | %11s | %11s | %11s |\n", "Metric", "Cur Usage",
                "Peak Usage", "Tot Alloc", "Tot Freed");
  out += line;
  out += kRule;
  rows(out, "Allocated memory", s.allocated_bytes, true);
  out += kRule;
  rows(out, "Requested memory", s.requested_bytes, true);
  out += kRule;
  rows(out, "Reserved memory", s.reserved_bytes, true);
  out += kRule;
  rows(out, "Allocated blocks", s.allocated_blocks, false);
  out += kRule;
  rows(out, "Active blocks", s.active_blocks, false);
  out += kRule;
  rows(out, "Segments", s.segments, false);
  out += kRule;
  out += counter_line("Malloc calls", s.malloc_calls);
  out += counter_line("Cache hits", s.cache_hits);
  out += counter_line("Free calls", s.free_calls);
  out += counter_line("Upstream allocs", s.upstream_allocs);
  out += counter_line("Upstream frees", s.upstream_frees);
  out += counter_line("Out-of-memory errors", s.ooms);
  out += counter_line("Cache flushes", s.cache_flushes);
  out += counter_line("Events recorded", s.events_recorded);
  out += kRule;
  out += text_line("Pool limit", format_bytes(c.pool_limit));
  out += text_line("Release threshold", format_bytes(c.release_threshold));
  out += text_line("Max split size", format_bytes(c.max_split_size));
  out += kDoubleRule;
  return out;
}

}  // namespace memory
}  // namespace gradcomm
