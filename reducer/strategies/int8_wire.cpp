#include "reducer/strategies/int8_wire.hpp"

#include "common/config.hpp"
#include "kernels/quant/int8.hpp"
#include "reducer/strategies/block_wire.hpp"

namespace gradcomm::reducer {

namespace {

const BlockWireKind& int8_kind() {
  static const BlockWireKind kind{
      gcommCompressionInt8, "int8", kernels::quant::int8_codec(), {'G', 'C', 'Q', 'I', 'N', 'T', '8', '\0'}};
  return kind;
}

}  // namespace

std::unique_ptr<CompressionStrategy> make_int8_wire(const void* config, const StrategySetup& setup) {
  const gcommInt8Config_t defaults = GCOMM_INT8_CONFIG_INITIALIZER;
  const gcommInt8Config_t c =
      read_config(static_cast<const gcommInt8Config_t*>(config), defaults, "gcommInt8Config_t");
  const BlockWireOptions options = block_wire_options(c.block_size, c.error_feedback, c.start_iter);
  refuse_unsupported_setup("int8", setup);
  return std::make_unique<BlockWire>(int8_kind(), options, setup.world, setup.rank, setup.allocator,
                                     setup.side, setup.device);
}

std::unique_ptr<CompressionStrategy> make_int8_wire_from_text(OptionText& options,
                                                              const StrategySetup& setup) {
  gcommInt8Config_t c = GCOMM_INT8_CONFIG_INITIALIZER;
  take_block_wire_options(options, c.block_size, c.error_feedback, c.start_iter);
  options.finish();
  return make_int8_wire(&c, setup);
}

}  // namespace gradcomm::reducer
