#include "reducer/compressions.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/error.hpp"
#include "reducer/strategies/fp4_wire.hpp"
#include "reducer/strategies/fp8_wire.hpp"
#include "reducer/strategies/int8_wire.hpp"
#include "reducer/strategies/powersgd.hpp"

namespace gradcomm::reducer {

namespace {

const CompressionEntry kCompressions[] = {
    {gcommCompressionPowerSgd, "powersgd", "gcommCompressionPowerSgd", "gcommPowerSgdStats_t",
     "GCOMM_POWERSGD_STATS_INITIALIZER", make_powersgd, make_powersgd_from_text,
     "rank=2,start_iter=0,min_compression_rate=1"},
    {gcommCompressionInt8, "int8", "gcommCompressionInt8", "gcommInt8Stats_t", "GCOMM_INT8_STATS_INITIALIZER",
     make_int8_wire, make_int8_wire_from_text, "block_size=128,start_iter=0"},
    {gcommCompressionFp8, "fp8", "gcommCompressionFp8", "gcommFp8Stats_t", "GCOMM_FP8_STATS_INITIALIZER",
     make_fp8_wire, make_fp8_wire_from_text, "block_size=128,start_iter=0"},
    {gcommCompressionFp4, "fp4", "gcommCompressionFp4", "gcommFp4Stats_t", "GCOMM_FP4_STATS_INITIALIZER",
     make_fp4_wire, make_fp4_wire_from_text, "block_size=32,start_iter=0"},
};

std::string known_names() {
  std::string s = "none";
  for (const CompressionEntry& e : kCompressions) s += cat(", ", e.name);
  return s;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

const std::vector<const CompressionEntry*>& compression_entries() {
  static const std::vector<const CompressionEntry*> all = [] {
    std::vector<const CompressionEntry*> v;
    for (const CompressionEntry& e : kCompressions) v.push_back(&e);
    return v;
  }();
  return all;
}

const CompressionEntry& compression_entry(gcommCompression_t kind) {
  for (const CompressionEntry& e : kCompressions)
    if (e.kind == kind) return e;
  if (kind == gcommCompressionNone)
    fail(gcommInvalidArgument,
         "gcommCompressionNone is no compression (every reducer's start): it has no config, statistics or "
         "state");
  std::string kinds;
  for (const CompressionEntry& e : kCompressions) kinds += cat(kinds.empty() ? "" : ", ", e.enumerator);
  fail(gcommInvalidArgument, "compression kind ", static_cast<int>(kind), " is not a gcommCompression_t (",
       kinds, ")");
}

const CompressionEntry& compression_entry_of_text(const std::string& spec, std::string* options) {
  const size_t colon = spec.find(':');
  const std::string name = trimmed(spec.substr(0, colon));
  *options = colon == std::string::npos ? "" : spec.substr(colon + 1);
  for (const CompressionEntry& e : kCompressions)
    if (name == e.name) return e;
  fail(gcommInvalidArgument, "compression '", name, "' (in '", spec, "') is not one of ", known_names(),
       (name == "none" ? " that can be enabled: every reducer starts with none" : ""));
}

const char* compression_name(gcommCompression_t kind) noexcept {
  for (const CompressionEntry& e : kCompressions)
    if (e.kind == kind) return e.name;
  return kind == gcommCompressionNone ? "none" : "unknown";
}

OptionText::OptionText(std::string kind, const std::string& text) : kind_(std::move(kind)) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = trimmed(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    require(eq != std::string::npos && eq > 0, kind_, " option '", item, "' is not key=value");
    const std::string key = trimmed(item.substr(0, eq));
    require(values_.count(key) == 0, kind_, " option '", key, "' is given twice");
    values_[key] = trimmed(item.substr(eq + 1));
  }
}

const std::string* OptionText::find(const char* key) {
  known_.push_back(key);
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void OptionText::take(const char* key, int& field) {
  const std::string* v = find(key);
  if (v == nullptr) return;
  if (*v == "true" || *v == "false") {  // Python's booleans, as text
    field = *v == "true" ? 1 : 0;
    return;
  }
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v->c_str(), &end, 10);
  require(!v->empty() && *end == '\0' && errno == 0 && x >= INT32_MIN && x <= INT32_MAX, kind_, " option ",
          key, "='", *v, "' is not an integer");
  field = static_cast<int>(x);
}

void OptionText::take(const char* key, float& field) {
  const std::string* v = find(key);
  if (v == nullptr) return;
  char* end = nullptr;
  errno = 0;
  const float x = std::strtof(v->c_str(), &end);
  require(!v->empty() && *end == '\0', kind_, " option ", key, "='", *v, "' is not a number");
  require(errno != ERANGE, kind_, " option ", key, "='", *v, "' is outside a float's range");
  field = x;
}

void OptionText::take(const char* key, uint64_t& field) {
  const std::string* v = find(key);
  if (v == nullptr) return;
  char* end = nullptr;
  errno = 0;
  const bool hex = v->size() > 2 && (*v)[0] == '0' && ((*v)[1] == 'x' || (*v)[1] == 'X');
  const unsigned long long x = std::strtoull(v->c_str(), &end, hex ? 16 : 10);  // "010" is ten, not eight
  require(!v->empty() && v->front() != '-' && *end == '\0' && errno == 0, kind_, " option ", key, "='", *v,
          "' is not a non-negative integer");
  field = x;
}

void OptionText::take(const char* key, int& field, std::initializer_list<std::pair<const char*, int>> names) {
  const std::string* v = find(key);
  if (v == nullptr) return;
  std::string known;
  for (const auto& [name, value] : names) {
    if (*v == name) {
      field = value;
      return;
    }
    known += cat(known.empty() ? "" : ", ", name);
  }
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v->c_str(), &end, 10);
  require(!v->empty() && *end == '\0' && errno == 0 && x >= INT32_MIN && x <= INT32_MAX, kind_, " option ",
          key, "='", *v, "' is not one of ", known);
  field = static_cast<int>(x);  // the struct's check refuses a number that is no value
}

void OptionText::finish() const {
  for (const auto& [key, value] : values_) {
    bool found = false;
    for (const std::string& k : known_) found = found || k == key;
    if (found) continue;
    std::string known;
    for (const std::string& k : known_) known += cat(known.empty() ? "" : ", ", k);
    fail(gcommInvalidArgument, kind_, " has no option '", key, "' (its options: ", known, ")");
  }
}

}  // namespace gradcomm::reducer
