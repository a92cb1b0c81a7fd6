// The fp8 wire: the block-quantized wire (block_wire.hpp) with fp8 codes, e4m3 or
// e5m2 (kernels/quant/fp8.hpp), one f32 scale per block: the int8 wire's bytes, an
// error relative to each value instead of to the block's largest
// (docs/compression.md, "fp8").
#pragma once

#include <memory>

#include "reducer/compressions.hpp"

namespace gradcomm::reducer {

// The compression table's factories (compressions.cpp): a gcommFp8Config_t (NULL:
// defaults) or its text form ("fp8:format=e5m2"); refused with views and in
// sharded mode.
std::unique_ptr<CompressionStrategy> make_fp8_wire(const void* config, const StrategySetup& setup);
std::unique_ptr<CompressionStrategy> make_fp8_wire_from_text(OptionText& options, const StrategySetup& setup);

}  // namespace gradcomm::reducer
