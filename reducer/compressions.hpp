// The compression table (as comm/transports.hpp is the transport table): every
// compression strategy a reducer can enable besides the plain all-reduce, one
// entry each in compressions.cpp. A new strategy is its own files under
// strategies/, its config and stats structs and gcommCompression_t value in
// include/gradcomm/reducer.h, and one line there; the reducer, the C API and the
// Python package name none of them.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradcomm/reducer.h"
#include "memory/caching_allocator.hpp"
#include "reducer/side_stream.hpp"
#include "reducer/strategy.hpp"

namespace gradcomm::reducer {

// What a strategy is made from besides its config: the reducer's gradients and
// where its buffers live. Valid during the factory call only.
struct StrategySetup {
  const std::vector<gcommTensor_t>& grads;  // registration order
  const size_t* grad_rows;                  // each gradient's first dimension, or NULL (not given)
  bool views;                               // grad_as_bucket_view
  bool sharded;                             // gcommReducerSharded
  int world, rank;
  memory::CachingAllocator& allocator;
  SideStream& side;
  gcommDevice_t device;
};

// The text form's key=value options, taken one by one by the kind that parses them
// into its config struct; finish() refuses whatever no take() asked for.
class OptionText {
 public:
  OptionText(std::string kind, const std::string& text);  // "a=1,b=2" (may be empty)
  void take(const char* key, int& field);
  void take(const char* key, float& field);
  void take(const char* key, uint64_t& field);
  // An enum field, given by one of `names` ("format=e5m2") or by its number.
  void take(const char* key, int& field, std::initializer_list<std::pair<const char*, int>> names);
  void finish() const;

 private:
  const std::string* find(const char* key);
  std::string kind_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> known_;  // the keys take() asked for
};

using ConfigFactory = std::unique_ptr<CompressionStrategy> (*)(const void* config,
                                                               const StrategySetup& setup);
using TextFactory = std::unique_ptr<CompressionStrategy> (*)(OptionText& options, const StrategySetup& setup);

struct CompressionEntry {
  gcommCompression_t kind;
  const char* name;               // "int8": the text form's and Python's name
  const char* enumerator;         // "gcommCompressionInt8": in messages
  const char* stats_struct;       // "gcommInt8Stats_t"
  const char* stats_initializer;  // "GCOMM_INT8_STATS_INITIALIZER"
  // Validates the config struct (NULL: defaults) and the setup, then makes the
  // strategy (nothing allocated before set_layout). Throws naming what is wrong.
  ConfigFactory from_config;
  // The same from options named as the config struct's fields.
  TextFactory from_text;
  // The text options under which it compresses from the first step, on a few
  // gradients of a few thousand values (tests/reducer/strategies/contract_test.cpp
  // holds every entry to the strategy contract under them).
  const char* contract_options;
};

// Every entry, in table order.
const std::vector<const CompressionEntry*>& compression_entries();

// The table's entry for `kind`; gcommInvalidArgument naming the kinds for another
// value (gcommCompressionNone has no entry: it is every reducer's start).
const CompressionEntry& compression_entry(gcommCompression_t kind);
// The entry named by a spec's "name" or "name:options" and its options text.
const CompressionEntry& compression_entry_of_text(const std::string& spec, std::string* options);
// The name of `kind` ("none" included), for messages and the JSON description.
const char* compression_name(gcommCompression_t kind) noexcept;

}  // namespace gradcomm::reducer
