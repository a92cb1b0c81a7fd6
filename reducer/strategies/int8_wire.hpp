// The int8 wire: the block-quantized wire (block_wire.hpp) with int8 codes, one f32
// scale per block of 256 values by default: about 0.26x the bytes of an f32
// all-reduce (docs/reducer.md, "The int8 wire").
#pragma once

#include <memory>

#include "reducer/compressions.hpp"

namespace gradcomm::reducer {

// The compression table's factories (compressions.cpp): a gcommInt8Config_t (NULL:
// defaults) or its text form; refused with views and in sharded mode.
std::unique_ptr<CompressionStrategy> make_int8_wire(const void* config, const StrategySetup& setup);
std::unique_ptr<CompressionStrategy> make_int8_wire_from_text(OptionText& options,
                                                              const StrategySetup& setup);

}  // namespace gradcomm::reducer
