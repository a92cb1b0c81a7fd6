#include "reducer/strategy.hpp"

#include "common/error.hpp"

namespace gradcomm::reducer {

// The all-reduce strategy is the only one without these: it is every reducer's
// start and keeps no state across steps.
std::vector<uint8_t> CompressionStrategy::save(StatePart /*part*/) {
  fail(gcommInvalidState, "no compression is enabled on this reducer: it has no compression state to save");
}

void CompressionStrategy::load(const uint8_t* /*data*/, size_t /*bytes*/, StateOrigin /*origin*/) {
  fail(gcommInvalidState,
       "no compression is enabled on this reducer: enable the one the state was saved with "
       "first");
}

}  // namespace gradcomm::reducer
