// Who a rank is, from the launcher's environment or explicit config values:
// torchrun, Open MPI and Slurm, their precedence, config overrides, and every bad
// value with a message that names the variable and what to do.
#include "comm/bootstrap/launch_env.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

gcommCommConfig_t defaults() {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  c.timeout_s = 7;
  return c;
}

LaunchConfig from_env(const Env& env, gcommCommConfig_t c = defaults()) {
  return launch_from_env(c, lookup(env));
}

// The message of the gcommInvalidArgument that `f` throws ("" if none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const Env kMaster = {{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500"}};

Env with(Env base, const Env& more) {
  for (auto& kv : more) base[kv.first] = kv.second;
  return base;
}

TEST(LaunchEnv, Torchrun) {
  auto lc = from_env(with(kMaster, {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(lc.rank, 5);
  EXPECT_EQ(lc.world_size, 8);
  EXPECT_EQ(lc.local_rank, 1);
  EXPECT_EQ(lc.master_addr, "node1");
  EXPECT_EQ(lc.master_port, 29500);
  EXPECT_EQ(lc.device.kind, gcommDeviceCuda);
  EXPECT_EQ(lc.device.ordinal, 1) << "LOCAL_RANK picks the GPU";
  EXPECT_EQ(lc.job_key, "gradcomm");
  EXPECT_EQ(lc.timeout_s, 7);
  EXPECT_EQ(lc.source, "torchrun environment");
}

// torchrun's agent listens on MASTER_PORT itself (workers share its TCPStore):
// under torchrun gradcomm's store takes MASTER_PORT + 1 on every rank;
// GRADCOMM_MASTER_PORT names the port outright, and config.master_port wins over both.
TEST(LaunchEnv, UnderTorchrunTheStoreTakesTheNextPort) {
  const Env plain = with(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  const Env torchrun = with(plain, {{"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_EQ(from_env(torchrun).master_port, 29501);
  EXPECT_EQ(from_env(plain).master_port, 29500) << "the same variables without torchrun: MASTER_PORT itself";
  EXPECT_EQ(from_env(with(torchrun, {{"GRADCOMM_MASTER_PORT", "40000"}})).master_port, 40000);
  EXPECT_EQ(from_env(with(plain, {{"GRADCOMM_MASTER_PORT", "40001"}})).master_port, 40001);
  gcommCommConfig_t c = defaults();
  c.master_port = 31000;
  EXPECT_EQ(from_env(with(torchrun, {{"GRADCOMM_MASTER_PORT", "40000"}}), c).master_port, 31000);
  EXPECT_NE(refusal([&] {
              from_env(with(torchrun, {{"MASTER_PORT", "65535"}}));
            }).find("GRADCOMM_MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              from_env(with(torchrun, {{"GRADCOMM_MASTER_PORT", "x"}}));
            }).find("GRADCOMM_MASTER_PORT='x'"),
            std::string::npos);
}

TEST(LaunchEnv, OpenMpi) {
  auto lc = from_env(with(
      kMaster,
      {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  EXPECT_EQ(lc.rank, 3);
  EXPECT_EQ(lc.world_size, 4);
  EXPECT_EQ(lc.device.ordinal, 3);
  EXPECT_EQ(lc.source, "Open MPI environment");
}

TEST(LaunchEnv, Slurm) {
  auto lc = from_env(with(kMaster, {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "2"}}));
  EXPECT_EQ(lc.rank, 6);
  EXPECT_EQ(lc.world_size, 16);
  EXPECT_EQ(lc.device.ordinal, 2);
  EXPECT_EQ(lc.source, "Slurm environment");
}

TEST(LaunchEnv, TorchrunThenOpenMpiThenSlurmAndNeverMixed) {
  Env slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}};
  Env ompi = {
      {"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_SIZE", "12"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  // torchrun inside a Slurm allocation: torchrun's values.
  auto lc = from_env(with(with(kMaster, slurm), {{"RANK", "7"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}}));
  EXPECT_EQ(lc.rank, 7);
  EXPECT_EQ(lc.world_size, 8);
  EXPECT_EQ(lc.local_rank, 3);
  // mpirun inside a Slurm allocation: Open MPI's.
  lc = from_env(with(with(kMaster, slurm), ompi));
  EXPECT_EQ(lc.rank, 9);
  EXPECT_EQ(lc.world_size, 12);
  // torchrun without LOCAL_RANK does not borrow Slurm's.
  lc = from_env(with(with(kMaster, slurm), {{"RANK", "1"}, {"WORLD_SIZE", "2"}}), [] {
    gcommCommConfig_t c = defaults();
    c.device = gcommCudaDevice(0);
    return c;
  }());
  EXPECT_EQ(lc.local_rank, -1);
}

// Issue 18: variables of several launchers. The launcher that started the process
// wins over a hand-set (stale) RANK / WORLD_SIZE: never two ranks 0.
TEST(LaunchEnv, AStaleRankLosesToMpirun) {
  const Env stale = with(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  auto lc = from_env(with(
      stale,
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(lc.rank, 1);
  EXPECT_EQ(lc.world_size, 2);
  EXPECT_EQ(lc.source, "Open MPI environment");
}

// A hand-set WORLD_SIZE that disagrees is refused on every rank (it used to make
// two separate one-rank jobs that both exited 0).
TEST(LaunchEnv, AStaleWorldSizeIsRefusedNamingBoth) {
  const Env srun = {{"SLURM_PROCID", "1"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_JOB_ID", "41"},
                    {"SLURM_STEP_ID", "0"}};
  std::string m = refusal([&] { from_env(with(with(kMaster, srun), {{"RANK", "0"}, {"WORLD_SIZE", "1"}})); });
  EXPECT_TRUE(contains(m, "RANK=0 WORLD_SIZE=1")) << m;
  EXPECT_TRUE(contains(m, "SLURM_PROCID=1 SLURM_NTASKS=2 set by Slurm")) << m;
  EXPECT_TRUE(contains(m, "unset them")) << m;
}

TEST(LaunchEnv, TorchrunStartedBySrunKeepsTorchrunsValues) {
  const Env srun = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "41"}, {"SLURM_STEP_ID", "0"}};
  auto lc = from_env(
      with(with(kMaster, srun),
           {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "r1"}}));
  EXPECT_EQ(lc.rank, 5);
  EXPECT_EQ(lc.world_size, 8);
}

TEST(LaunchEnv, SbatchWithoutSrunIsRefusedAtOnce) {
  const Env batch = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "41"}};
  std::string m = refusal([&] { from_env(with(kMaster, batch)); });
  EXPECT_TRUE(contains(m, "not started by srun")) << m;
  EXPECT_TRUE(contains(m, "srun ./program")) << m;
  // A batch script of one task is a world of one.
  auto lc = from_env(with(batch, {{"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(lc.world_size, 1);
  // A caller that needs no rank from it is not refused: explicit values, or a tool
  // asking whether a launcher started it (a single-process run, as nccl-tests').
  gcommCommConfig_t c = defaults();
  c.rank = 0;
  c.world_size = 1;
  c.device = gcommHostDevice();
  EXPECT_EQ(from_env(batch, c).world_size, 1);
  EXPECT_FALSE(launcher_placement(lookup(batch)).has_value());
}

TEST(LaunchEnv, SrunImpliesTheRendezvous) {
  const Env step = {{"SLURM_PROCID", "1"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_JOB_ID", "41"},
                    {"SLURM_STEP_ID", "0"}};
  auto one_node = from_env(with(step, {{"SLURM_STEP_NUM_NODES", "1"}, {"SLURM_STEP_NODELIST", "n1"}}));
  EXPECT_EQ(one_node.master_addr, "127.0.0.1");
  EXPECT_GE(one_node.master_port, 20000);
  EXPECT_LT(one_node.master_port, 30000);
  auto two_nodes =
      from_env(with(step, {{"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"}}));
  EXPECT_EQ(two_nodes.master_addr, "gpu07");
  EXPECT_EQ(two_nodes.master_port, one_node.master_port) << "every rank of the step computes the same port";
  auto next_job = from_env(with(step, {{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_NUM_NODES", "1"}}));
  EXPECT_NE(next_job.master_port, one_node.master_port);
  // MASTER_ADDR / MASTER_PORT win when set.
  auto explicit_master = from_env(with(with(step, kMaster), {{"SLURM_STEP_NUM_NODES", "1"}}));
  EXPECT_EQ(explicit_master.master_addr, "node1");
  EXPECT_EQ(explicit_master.master_port, 29500);
}

TEST(LaunchEnv, SingleHostMpirunImpliesTheRendezvous) {
  const Env mpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "3"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_MCA_ess_base_jobid", "123"}};
  auto lc = from_env(with(mpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  EXPECT_EQ(lc.master_addr, "127.0.0.1");
  EXPECT_GE(lc.master_port, 20000);
  // Across hosts the address is not implied (until the MPI bootstrap).
  std::string m = refusal([&] { from_env(with(mpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})); });
  EXPECT_TRUE(contains(m, "mpirun -x MASTER_ADDR")) << m;
}

TEST(LaunchEnv, ConfigFieldsWinOverTheEnvironment) {
  gcommCommConfig_t c = defaults();
  c.rank = 1;
  c.world_size = 2;
  c.master_addr = "10.0.0.9";
  c.master_port = 1234;
  c.job_key = "run-42";
  c.device = gcommCudaDevice(0);
  auto lc = from_env(
      with(kMaster,
           {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"GRADCOMM_JOB_KEY", "env-key"}}),
      c);
  EXPECT_EQ(lc.rank, 1);
  EXPECT_EQ(lc.world_size, 2);
  EXPECT_EQ(lc.master_addr, "10.0.0.9");
  EXPECT_EQ(lc.master_port, 1234);
  EXPECT_EQ(lc.job_key, "run-42");
  EXPECT_EQ(lc.device.ordinal, 0);
  EXPECT_EQ(lc.local_rank, 1) << "still read: only the device was explicit";
  // The job key from the environment when the config leaves it NULL.
  EXPECT_EQ(
      from_env(
          with(kMaster,
               {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"GRADCOMM_JOB_KEY", "env-key"}}))
          .job_key,
      "env-key");
  // A host device is passed on (the init then says why it cannot be used).
  c.device = gcommHostDevice();
  EXPECT_EQ(from_env({}, c).device.kind, gcommDeviceHost);
}

TEST(LaunchEnv, AWorldOfOneNeedsNoMaster) {
  auto lc = from_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(lc.master_addr, "127.0.0.1");
  EXPECT_EQ(lc.master_port, 0);
}

// A world of one has no peer to find its store, so a port named by the environment
// (torch.distributed's MASTER_PORT, often still held by its own store) is not bound:
// on an H100 a leaked world-of-one store on 29500 failed every later init (2026-11-25).
// A port the caller sets in the config is still used.
TEST(LaunchEnv, AWorldOfOneIgnoresTheEnvironmentsPort) {
  const Env one = {{"RANK", "0"},
                   {"WORLD_SIZE", "1"},
                   {"LOCAL_RANK", "0"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "29500"}};
  EXPECT_EQ(from_env(one).master_port, 0);
  EXPECT_EQ(from_env(with(one, {{"GRADCOMM_MASTER_PORT", "40000"}})).master_port, 0);
  EXPECT_EQ(from_env(with(one, {{"TORCHELASTIC_RUN_ID", "abc"}})).master_port, 0);
  gcommCommConfig_t c = defaults();
  c.master_port = 31000;
  EXPECT_EQ(from_env(one, c).master_port, 31000);
}

TEST(LaunchEnv, BadNumbersNameTheVariable) {
  Env base = with(kMaster, {{"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}});
  for (const char* bad : {"abc", "1x", " 1", "1.5", "-1", "99999999999999999999", "+"}) {
    std::string m = refusal([&] { from_env(with(base, {{"RANK", bad}})); });
    EXPECT_TRUE(contains(m, std::string("RANK='") + bad + "' (torchrun) is not an integer in [0, ")) << m;
  }
  std::string m = refusal([&] { from_env(with(base, {{"RANK", "1"}, {"WORLD_SIZE", "0"}})); });
  EXPECT_TRUE(contains(m, "WORLD_SIZE='0' (torchrun) is not an integer in [1, ")) << m;
  m = refusal([&] { from_env(with(base, {{"RANK", "1"}, {"LOCAL_RANK", "x"}})); });
  EXPECT_TRUE(contains(m, "LOCAL_RANK='x'")) << m;
  m = refusal([&] { from_env(with(base, {{"RANK", "1"}, {"MASTER_PORT", "70000"}})); });
  EXPECT_TRUE(contains(m, "MASTER_PORT='70000'")) << m;
  m = refusal([&] { from_env(with(kMaster, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}})); });
  EXPECT_TRUE(contains(m, "SLURM_NTASKS='two' (Slurm)")) << m;
}

TEST(LaunchEnv, RankMustBeBelowTheWorldSize) {
  std::string m = refusal([] {
    from_env(with(kMaster, {{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}));
  });
  EXPECT_TRUE(contains(m, "RANK=4 is not below WORLD_SIZE=4 (ranks are 0..3)")) << m;
  gcommCommConfig_t c = defaults();
  c.rank = 2;
  m = refusal([&] { from_env(with(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}), c); });
  EXPECT_TRUE(contains(m, "config.rank=2 is not below WORLD_SIZE=2")) << m;
}

TEST(LaunchEnv, MissingValuesSayWhatToSet) {
  std::string m = refusal([] { from_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}); });
  EXPECT_TRUE(contains(m, "MASTER_ADDR is not set")) << m;
  EXPECT_TRUE(contains(m, "MASTER_ADDR=<rank 0's host>")) << m;
  m = refusal([] {
    from_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}});
  });
  EXPECT_TRUE(contains(m, "MASTER_PORT is not set")) << m;
  m = refusal([] { from_env(with(kMaster, {{"RANK", "1"}, {"LOCAL_RANK", "1"}})); });
  EXPECT_TRUE(contains(m, "WORLD_SIZE is not set although RANK is (an incomplete torchrun environment)"))
      << m;
  m = refusal([] { from_env(kMaster); });
  EXPECT_TRUE(contains(m, "no rank: config.rank is -1 and none of RANK (torchrun), OMPI_COMM_WORLD_RANK"))
      << m;
  m = refusal([] { from_env(with(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "2"}})); });
  EXPECT_TRUE(contains(m, "no GPU chosen")) << m;
}

TEST(LaunchEnv, BadConfigFields) {
  auto refused = [](void (*edit)(gcommCommConfig_t&)) {
    gcommCommConfig_t c = defaults();
    c.rank = 0;
    c.world_size = 2;
    c.master_addr = "h";
    c.master_port = 29500;
    c.local_rank = 0;
    edit(c);
    return refusal([&] { launch_from_config(c, lookup({})); });
  };
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.rank = -5; }), "config.rank is -5")) << "";
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.world_size = 0; }), "config.world_size is 0"));
  EXPECT_TRUE(
      contains(refused([](gcommCommConfig_t& c) { c.master_port = 65536; }), "config.master_port is 65536"));
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.master_port = 0; }), "port 0 (any free port)"));
  EXPECT_TRUE(
      contains(refused([](gcommCommConfig_t& c) { c.master_addr = ""; }), "config.master_addr is empty"));
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.job_key = ""; }), "config.job_key is empty"));
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.timeout_s = std::nan(""); }), "NaN"));
  EXPECT_TRUE(
      contains(refused([](gcommCommConfig_t& c) { c.device.ordinal = -2; }), "config.device.ordinal is -2"));
  EXPECT_TRUE(contains(
      refused([](gcommCommConfig_t& c) { c.device.kind = static_cast<gcommDeviceKind_t>(7); }), "kind 7"));
  EXPECT_TRUE(contains(refused([](gcommCommConfig_t& c) { c.master_addr = nullptr; }),
                       "config.master_addr is required when world_size > 1"));
}

// Issue 17 #7: two jobs on one port with the default job key joined one store
// (job F's ranks filled job E's world). The default key now carries the
// launcher's id of the launch, so two launches differ; GRADCOMM_JOB_KEY and
// config.job_key still win, and without an id the key stays "gradcomm".
TEST(LaunchEnv, TheDefaultJobKeyDiffersBetweenLaunches) {
  gcommCommConfig_t host = defaults();
  host.device = gcommHostDevice();
  auto key = [&](const Env& env) { return from_env(env, host).job_key; };
  const Env torch = with(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "3"}});
  EXPECT_EQ(key(with(torch, {{"TORCHELASTIC_RUN_ID", "E"}})), "gradcomm:E");
  EXPECT_NE(key(with(torch, {{"TORCHELASTIC_RUN_ID", "E"}})),
            key(with(torch, {{"TORCHELASTIC_RUN_ID", "F"}})));
  const Env mpi = with(kMaster, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(key(with(mpi, {{"PMIX_NAMESPACE", "prterun-a-1@1"}})), "gradcomm:prterun-a-1@1");
  EXPECT_EQ(key(with(mpi, {{"OMPI_MCA_ess_base_jobid", "77"}})), "gradcomm:77");
  const Env slurm = with(kMaster, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "900"}});
  EXPECT_EQ(key(with(slurm, {{"SLURM_STEP_ID", "0"}})), "gradcomm:900:0");
  EXPECT_NE(key(with(slurm, {{"SLURM_STEP_ID", "0"}})), key(with(slurm, {{"SLURM_STEP_ID", "1"}})))
      << "two sruns in one allocation";
  EXPECT_EQ(key(slurm), "gradcomm") << "an incomplete id is no id";
  // The id of the launcher that supplied the rank, not another's left over.
  EXPECT_EQ(key(with(torch, {{"SLURM_JOB_ID", "900"}, {"SLURM_STEP_ID", "0"}})), "gradcomm");
  EXPECT_EQ(key(with(torch, {{"TORCHELASTIC_RUN_ID", "E"}, {"GRADCOMM_JOB_KEY", "mine"}})), "mine");
  gcommCommConfig_t c = host;
  c.job_key = "explicit";
  EXPECT_EQ(from_env(with(torch, {{"TORCHELASTIC_RUN_ID", "E"}}), c).job_key, "explicit");
  // gcommCommInit (explicit ranks) may join processes of different launches: no id.
  c = defaults();
  c.rank = 0;
  c.world_size = 1;
  c.device = gcommHostDevice();
  EXPECT_EQ(launch_from_config(c, lookup(with(torch, {{"TORCHELASTIC_RUN_ID", "E"}}))).job_key, "gradcomm");
}

// What tools read to decide whether each process is a rank (gcommGetLauncherRank):
// the launcher's rank and world size, parsed as init parses them.
TEST(LaunchEnv, LauncherPlacementIsParsedAsInitParsesIt) {
  EXPECT_FALSE(launcher_placement(lookup({})).has_value());
  auto p = launcher_placement(lookup({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}}));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->launcher, "Slurm");
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->world_size, 4);
  EXPECT_TRUE(contains(refusal([] {
                         launcher_placement(lookup({{"RANK", "1"}, {"WORLD_SIZE", "abc"}}));
                       }),
                       "WORLD_SIZE='abc' (torchrun) is not an integer"));
  EXPECT_TRUE(contains(refusal([] {
                         launcher_placement(lookup({{"RANK", "1"}}));
                       }),
                       "WORLD_SIZE is not set although RANK is"));
  EXPECT_TRUE(contains(refusal([] {
                         launcher_placement(lookup({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
                       }),
                       "RANK=4 is not below WORLD_SIZE=4"));
}

TEST(LaunchEnv, ExplicitInitReadsNoLauncherVariables) {
  Env env =
      with(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"GRADCOMM_JOB_KEY", "k"}});
  std::string m = refusal([&] { launch_from_config(defaults(), lookup(env)); });
  EXPECT_TRUE(contains(m, "config.rank is required")) << m;
  gcommCommConfig_t c = defaults();
  c.rank = 0;
  c.world_size = 1;
  c.device = gcommCudaDevice(0);
  auto lc = launch_from_config(c, lookup(env));
  EXPECT_EQ(lc.master_addr, "127.0.0.1") << "MASTER_ADDR is not read";
  EXPECT_EQ(lc.job_key, "k") << "the job key default is";
  EXPECT_EQ(lc.source, "config");
}

}  // namespace
}  // namespace gradcomm::comm::bootstrap
