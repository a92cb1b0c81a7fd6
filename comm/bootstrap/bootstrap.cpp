#include "comm/bootstrap/bootstrap.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_state.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::bootstrap {

Bootstrap::Bootstrap(const RendezvousOptions& options)
    : options_(options), started_(Clock::now()), deadline_(deadline_after(options.timeout_s)) {
  require(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size, "rank ",
          options.rank, " of world size ", options.world_size, " is not valid");
  port_ = options.master_port;
  const uint32_t generation = generation_ = generation_for(options);
  StoreClientOptions c;
  c.generation = generation;
  c.job_key = options.job_key;
  c.rank = options.rank;
  c.world_size = options.world_size;
  if (options.rank == 0 && !options.external_store) {
    StoreServerOptions s;
    s.host = options.master_addr;
    s.port = options.master_port;
    s.job_key = options.job_key;
    s.world_size = options.world_size;
    s.hello_timeout_s = options.hello_timeout_s;
    s.started = started_;
    s.generation = generation;
    try {
      server_ = std::make_unique<StoreServer>(s);
    } catch (const Error& e) {
      if (options.master_port == 0) throw;
      fail_listen(e);
    }
    port_ = server_->port();
    c.host = server_->loopback();
  } else {
    c.host = options.master_addr;
  }
  c.port = port_;
  address_ = host_port(options.master_addr, port_);
  c.address = address_;
  client_ = std::make_unique<StoreClient>(c, deadline_);
  GCOMM_INFO(STORE, "rank ", options.rank, " of ", options.world_size, " connected to the store at ",
             address_);
}

Bootstrap::~Bootstrap() {
  close(1.0);
}

namespace {

// Communicators made per (address, port, job key, rank) in this process.
std::mutex made_lock;
std::map<std::tuple<std::string, int, std::string, int>, uint32_t> made;

}  // namespace

uint32_t generation_for(const RendezvousOptions& options) {
  if (options.master_port == 0) return 0;
  std::lock_guard<std::mutex> held(made_lock);
  const auto it = made.find({options.master_addr, options.master_port, options.job_key, options.rank});
  return it == made.end() ? 0 : it->second;
}

void Bootstrap::fail_listen(const Error& listen_error) {
  // A store of this job key answers a second rank 0 by failing its own job
  // (store_server.cpp); anything else (another job key, another program, nobody)
  // leaves the plain reason.
  StoreClientOptions c;
  c.host = options_.master_addr;
  c.port = options_.master_port;
  c.address = host_port(options_.master_addr, options_.master_port);
  c.job_key = options_.job_key;
  c.rank = 0;
  c.world_size = options_.world_size;
  c.generation = generation_;
  try {
    StoreClient probe(c, std::min(deadline_, deadline_after(2.0)));
    probe.bye();  // it took this rank 0: it cannot be a store of this job
  } catch (const Error& e) {
    if (e.message().find(kSecondRankZero) != std::string::npos)
      fail(listen_error.status(), listen_error.message(),
           "; a store of this job key listens there: ", clash_message(options_.job_key, c.address));
  }
  throw listen_error;
}

std::vector<RankReport> Bootstrap::meet(const RankReport& mine) {
  Writer w;
  w.u32(static_cast<uint32_t>(mine.status)).str(mine.message);
  auto all = client_->gather("init", w.payload(), deadline_);
  if (options_.master_port != 0) {  // every rank met: the communicator counts for the generations
    std::lock_guard<std::mutex> held(made_lock);
    uint32_t& count = made[{options_.master_addr, options_.master_port, options_.job_key, options_.rank}];
    count = std::max(count, generation_ + 1);
  }
  std::vector<RankReport> reports(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    Reader rd(all[r].data(), all[r].size(), "init report");
    uint32_t status = rd.u32();
    reports[r].message = rd.str(kMaxPayloadBytes);
    rd.finish();
    reports[r].status = status < static_cast<uint32_t>(gcommNumStatuses) ? static_cast<gcommStatus_t>(status)
                                                                         : gcommRemoteError;
  }
  return reports;
}

void Bootstrap::shutdown(double timeout_s) noexcept {
  if (client_) {
    try {
      client_->barrier("shutdown", deadline_after(timeout_s));
    } catch (const std::exception& e) {
      GCOMM_WARN("rank ", options_.rank, ": the shutdown barrier failed: ", e.what());
    }
  }
  close(1.0);
}

void Bootstrap::abort(const std::string& reason) noexcept {
  if (client_) client_->abort(reason);
  close(1.0);
}

void Bootstrap::close(double flush_s) noexcept {
  if (client_) {
    client_->bye();
    client_.reset();
  }
  if (server_) {
    server_->stop(flush_s);
    server_.reset();
  }
}

void throw_if_any_failed(const std::vector<RankReport>& reports, int my_rank) {
  const RankReport& mine = reports.at(my_rank);
  if (mine.status != gcommSuccess) throw Error(mine.status, mine.message);
  std::vector<int> failed;
  for (size_t r = 0; r < reports.size(); ++r)
    if (reports[r].status != gcommSuccess) failed.push_back(static_cast<int>(r));
  if (failed.empty()) return;
  const RankReport& first = reports[failed.front()];
  fail(gcommRemoteError, rank_list(failed), " of ", reports.size(), " cannot take part; rank ",
       failed.front(), ": ", first.message);
}

RendezvousOptions rendezvous_options(const LaunchConfig& launch) {
  RendezvousOptions options;
  options.master_addr = launch.master_addr;
  options.master_port = launch.master_port;
  options.job_key = launch.job_key;
  options.rank = launch.rank;
  options.world_size = launch.world_size;
  options.timeout_s = launch.timeout_s;
  options.external_store = launch.external_store;
  return options;
}

void agree_on_transport(Bootstrap& boot, const std::string& mine) {
  auto all =
      boot.store().gather("transport", std::vector<uint8_t>(mine.begin(), mine.end()), boot.deadline());
  for (size_t q = 0; q < all.size(); ++q) {
    std::string theirs(all[q].begin(), all[q].end());
    if (theirs != mine)
      fail(
          gcommInvalidArgument, "rank ", boot.rank(), " uses the ", mine, " transport but rank ", q,
          " uses the ", theirs,
          " transport: every rank needs the same kind of device (all GPUs for nccl, all host for the host "
          "transports) and the same GRADCOMM_TRANSPORT or config.transport (\"auto\" chooses after the ranks "
          "meet, so it cannot meet a rank that named one)");
  }
}

}  // namespace gradcomm::comm::bootstrap
