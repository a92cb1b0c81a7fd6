#include "comm/shm/shm_transport.hpp"

#include <optional>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_state.hpp"
#include "comm/exchange/exchange_transport.hpp"
#include "comm/shm/shm_links.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

namespace {

std::string to_string(const std::vector<uint8_t>& b) {
  return std::string(b.begin(), b.end());
}

// Rank 0 creates the segment and publishes where it is (the address of its
// descriptor and the nonce); every rank maps it and says whether that worked, and
// once all have, rank 0 closes the descriptor. Every rank sees the same answers, so
// all return a segment or all return none (with why).
std::optional<shm::Segment> attach_segment(Bootstrap& boot, const std::string& job_key,
                                           std::string& why_not) {
  const int me = boot.rank(), n = boot.size();
  const uint64_t job = job_key_tag(job_key);
  std::optional<shm::Segment> segment;
  std::string mine;
  if (me == 0) {
    try {
      segment = shm::Segment::create(job, n);
      mine = cat(segment->address(), "\n", segment->nonce());
    } catch (...) {  // whatever was thrown, the others must hear it at the gather
      mine = "\n" + as_error(std::current_exception()).message();  // no address: the reason instead
    }
  }
  const std::vector<std::vector<uint8_t>> all =
      boot.store().gather("shm/segment", std::vector<uint8_t>(mine.begin(), mine.end()), boot.deadline());
  const std::string where = to_string(all[0]);
  std::string status;  // "" when this rank mapped the segment, else why not
  if (where.empty() || where[0] == '\n') {
    status =
        cat("rank 0 could not create the segment: ", where.empty() ? "no reason given" : where.substr(1));
  } else if (me != 0) {
    try {
      const size_t split = where.find('\n');
      const uint64_t nonce = std::stoull(where.substr(split + 1));
      segment = shm::Segment::open(where.substr(0, split), nonce, job, n);
    } catch (...) {
      status = cat("rank ", me, ": ", as_error(std::current_exception()).message());
    }
  }
  const std::vector<std::vector<uint8_t>> opened =
      boot.store().gather("shm/mapped", std::vector<uint8_t>(status.begin(), status.end()), boot.deadline());
  if (segment) segment->close_address();  // rank 0's: no other process can attach from now on
  for (const auto& o : opened)
    if (!o.empty()) {
      why_not = to_string(o);
      return std::nullopt;
    }
  return segment;
}

}  // namespace

Fit shm_can_serve(const JobFacts& job) {
  const std::vector<int> apart = job.apart_from_rank0(/*pid_namespace=*/true);
  if (!apart.empty()) {
    const RankFacts& first = job.ranks[apart[0]];
    const bool other_host = first.host != job.ranks[0].host;
    return Fit{cat(rank_list(apart),
                   other_host ? " on another host" : " in another PID namespace (a container)",
                   " than rank 0 (", job.ranks[0].host.substr(0, job.ranks[0].host.find(' ')),
                   "): the ranks of the shm transport share one host and PID namespace")};
  }
  return Fit{};
}

std::unique_ptr<Transport> try_make_shm_transport(Bootstrap& met, const LaunchConfig& launch,
                                                  std::string& why_not) {
  std::optional<shm::Segment> segment = attach_segment(met, launch.job_key, why_not);
  if (!segment) return nullptr;
  return make_exchange_transport(std::make_unique<shm::ShmLinks>(std::move(*segment), launch.rank),
                                 gcommTransportShm, launch.timeout_s);
}

std::unique_ptr<Transport> make_shm_over_job(Bootstrap& met, const LaunchConfig& launch, const JobFacts&,
                                             std::string& why_not) {
  return try_make_shm_transport(met, launch, why_not);
}

}  // namespace gradcomm::comm
