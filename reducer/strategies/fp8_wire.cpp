#include "reducer/strategies/fp8_wire.hpp"

#include "common/config.hpp"
#include "common/error.hpp"
#include "kernels/quant/fp8.hpp"
#include "reducer/strategies/block_wire.hpp"

namespace gradcomm::reducer {

namespace {

// Each format its own state magic: a state saved with e4m3 codes is refused by an
// e5m2 wire (its error feedback would be the other format's).
const BlockWireKind& fp8_kind(int format) {
  static const BlockWireKind e4m3{
      gcommCompressionFp8, "fp8", kernels::quant::fp8_e4m3_codec(), {'G', 'C', 'Q', 'F', 'P', '8', 'E', '4'}};
  static const BlockWireKind e5m2{
      gcommCompressionFp8, "fp8", kernels::quant::fp8_e5m2_codec(), {'G', 'C', 'Q', 'F', 'P', '8', 'E', '5'}};
  return format == gcommFp8E5M2 ? e5m2 : e4m3;
}

}  // namespace

std::unique_ptr<CompressionStrategy> make_fp8_wire(const void* config, const StrategySetup& setup) {
  const gcommFp8Config_t defaults = GCOMM_FP8_CONFIG_INITIALIZER;
  const gcommFp8Config_t c =
      read_config(static_cast<const gcommFp8Config_t*>(config), defaults, "gcommFp8Config_t");
  require(c.format == gcommFp8E4M3 || c.format == gcommFp8E5M2, "format ", c.format,
          " is not a gcommFp8Format_t (gcommFp8E4M3, gcommFp8E5M2)");
  require(c.reserved_v1 == 0, "reserved_v1 must be 0");
  const BlockWireOptions options = block_wire_options(c.block_size, c.error_feedback, c.start_iter);
  refuse_unsupported_setup("fp8", setup);
  return std::make_unique<BlockWire>(fp8_kind(c.format), options, setup.world, setup.rank, setup.allocator,
                                     setup.side, setup.device);
}

std::unique_ptr<CompressionStrategy> make_fp8_wire_from_text(OptionText& options,
                                                             const StrategySetup& setup) {
  gcommFp8Config_t c = GCOMM_FP8_CONFIG_INITIALIZER;
  options.take("format", c.format, {{"e4m3", gcommFp8E4M3}, {"e5m2", gcommFp8E5M2}});
  take_block_wire_options(options, c.block_size, c.error_feedback, c.start_iter);
  options.finish();
  return make_fp8_wire(&c, setup);
}

}  // namespace gradcomm::reducer
