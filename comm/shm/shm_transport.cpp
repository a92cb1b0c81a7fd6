#include "comm/shm/shm_transport.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/store_state.hpp"
#include "comm/bootstrap/wire.hpp"
#include "comm/exchange/exchange_transport.hpp"
#include "comm/shm/shm_links.hpp"
#include "comm/store_backed_transport.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

namespace {

std::string to_string(const std::vector<uint8_t>& b) {
  return std::string(b.begin(), b.end());
}

// This process's place for the shm transport: its host (host_identity) and its
// PID namespace, since peers open rank 0's segment through /proc/<pid>/fd/<n>,
// which means rank 0's process only within one namespace.
std::string shm_place() {
  struct stat st {};
  const unsigned long long pid_ns = ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
  return cat(host_identity(), " pid-namespace ", pid_ns);
}

// Rank 0 creates the segment and publishes where it is (its place, the address
// of its descriptor, the nonce); every rank checks that all are in rank 0's place
// and maps the segment; every rank says whether that worked, and once all have,
// rank 0 closes the descriptor. Every rank sees the same answers, so all return a
// segment or all return none (with why).
std::optional<shm::Segment> attach_segment(Bootstrap& boot, const std::string& job_key,
                                           std::string& why_not) {
  const int me = boot.rank(), n = boot.size();
  const uint64_t job = job_key_tag(job_key);
  std::optional<shm::Segment> segment;
  std::string mine = shm_place();
  if (me == 0) {
    try {
      segment = shm::Segment::create(job, n);
      mine += cat("\n", segment->address(), "\n", segment->nonce());
    } catch (...) {  // whatever was thrown, the others must hear it at the gather
      mine += "\n\n" + as_error(std::current_exception()).message();  // no address: the reason instead
    }
  }
  const std::vector<std::vector<uint8_t>> all =
      boot.store().gather("shm/segment", std::vector<uint8_t>(mine.begin(), mine.end()), boot.deadline());
  const std::string first = to_string(all[0]);
  const size_t newline = first.find('\n');
  const std::string place0 = first.substr(0, newline),
                    where = newline == std::string::npos ? "" : first.substr(newline + 1);
  std::vector<int> elsewhere;
  for (int q = 1; q < n; ++q)
    if (to_string(all[q]) != place0) elsewhere.push_back(q);
  std::string status;  // "" when this rank mapped the segment, else why not
  if (!elsewhere.empty()) {
    status = cat(rank_list(elsewhere), " on another host (or in another PID namespace) than rank 0 (",
                 place0.substr(0, place0.find(' ')), ")");
  } else if (where.empty() || where[0] == '\n') {
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

std::string host_identity() {
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(host) + " " + boot_id;
}

std::unique_ptr<Transport> try_make_shm_transport(Bootstrap& met, const LaunchConfig& launch,
                                                  std::string& why_not) {
  std::optional<shm::Segment> segment = attach_segment(met, launch.job_key, why_not);
  if (!segment) return nullptr;
  return make_exchange_transport(std::make_unique<shm::ShmLinks>(std::move(*segment), launch.rank),
                                 gcommTransportShm, launch.timeout_s);
}

std::unique_ptr<Transport> make_shm_transport_from_store(const LaunchConfig& launch) {
  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  throw_if_any_failed(boot->meet(RankReport{}), launch.rank);
  return finish_store_init(std::move(boot), launch, "shm", [&](Bootstrap& met) -> std::unique_ptr<Transport> {
    std::string why_not;
    std::unique_ptr<Transport> t = try_make_shm_transport(met, launch, why_not);
    if (t == nullptr)
      fail(gcommInvalidArgument,
           "the shm transport needs every rank on one host, in one PID namespace: ", why_not,
           "; GRADCOMM_TRANSPORT=socket (or unset) talks over TCP");
    return t;
  });
}

}  // namespace gradcomm::comm
