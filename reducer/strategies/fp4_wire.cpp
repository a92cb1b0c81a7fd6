#include "reducer/strategies/fp4_wire.hpp"

#include "common/config.hpp"
#include "kernels/quant/fp4.hpp"
#include "reducer/strategies/block_wire.hpp"

namespace gradcomm::reducer {

namespace {

const BlockWireKind& fp4_kind() {
  static const BlockWireKind kind{
      gcommCompressionFp4, "fp4", kernels::quant::fp4_e2m1_codec(), {'G', 'C', 'Q', 'F', 'P', '4', 'E', '2'}};
  return kind;
}

}  // namespace

std::unique_ptr<CompressionStrategy> make_fp4_wire(const void* config, const StrategySetup& setup) {
  const gcommFp4Config_t defaults = GCOMM_FP4_CONFIG_INITIALIZER;
  const gcommFp4Config_t c =
      read_config(static_cast<const gcommFp4Config_t*>(config), defaults, "gcommFp4Config_t");
  const BlockWireOptions options = block_wire_options(c.block_size, c.error_feedback, c.start_iter);
  refuse_unsupported_setup("fp4", setup);
  return std::make_unique<BlockWire>(fp4_kind(), options, setup.world, setup.rank, setup.allocator,
                                     setup.side, setup.device);
}

std::unique_ptr<CompressionStrategy> make_fp4_wire_from_text(OptionText& options,
                                                             const StrategySetup& setup) {
  gcommFp4Config_t c = GCOMM_FP4_CONFIG_INITIALIZER;
  take_block_wire_options(options, c.block_size, c.error_feedback, c.start_iter);
  options.finish();
  return make_fp4_wire(&c, setup);
}

}  // namespace gradcomm::reducer
