// The fp4 wire: the block-quantized wire (block_wire.hpp) with 4-bit e2m1 codes, two
// a byte (kernels/quant/fp4.hpp), one f32 scale per block: about half the int8
// wire's bytes at a larger error per step, for slow links (docs/compression.md,
// "fp4").
#pragma once

#include <memory>

#include "reducer/compressions.hpp"

namespace gradcomm::reducer {

// The compression table's factories (compressions.cpp): a gcommFp4Config_t (NULL:
// defaults) or its text form ("fp4:block_size=32"); refused with views and in
// sharded mode.
std::unique_ptr<CompressionStrategy> make_fp4_wire(const void* config, const StrategySetup& setup);
std::unique_ptr<CompressionStrategy> make_fp4_wire_from_text(OptionText& options, const StrategySetup& setup);

}  // namespace gradcomm::reducer
