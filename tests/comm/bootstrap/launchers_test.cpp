// Which launcher wins, with the warning for a hand-set RANK that loses
// (comm/bootstrap/launchers.hpp), and Slurm node lists.
#include "comm/bootstrap/launchers.hpp"
#include "comm/mpi/mpi_bootstrap.hpp"

#include <gtest/gtest.h>

#include <map>

#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {
namespace {

EnvLookup lookup(std::map<std::string, std::string> env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Launchers, AHandSetRankThatDisagreesIsNamedWithTheWinner) {
  auto c = choose_launcher(lookup(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  ASSERT_NE(c.launcher, nullptr);
  EXPECT_STREQ(c.launcher->name, "Open MPI");
  EXPECT_NE(c.warning.find("RANK=0 WORLD_SIZE=2"), std::string::npos) << c.warning;
  EXPECT_NE(c.warning.find("OMPI_COMM_WORLD_RANK=1"), std::string::npos) << c.warning;
  EXPECT_NE(c.warning.find("using Open MPI's"), std::string::npos) << c.warning;
}

TEST(Launchers, AgreeingValuesAreSilent) {
  auto c = choose_launcher(
      lookup({{"RANK", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "3"}}));
  ASSERT_NE(c.launcher, nullptr);
  EXPECT_STREQ(c.launcher->name, "Slurm");
  EXPECT_EQ(c.warning, "");
}

TEST(Launchers, MpirunInsideASlurmStepIsOpenMpi) {
  auto c = choose_launcher(lookup({{"SLURM_PROCID", "0"},
                                   {"SLURM_NTASKS", "1"},
                                   {"SLURM_STEP_ID", "0"},
                                   {"OMPI_COMM_WORLD_RANK", "3"},
                                   {"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_STREQ(c.launcher->name, "Open MPI");
  EXPECT_EQ(c.warning, "");
}

TEST(Launchers, NoLauncher) {
  EXPECT_EQ(choose_launcher(lookup({})).launcher, nullptr);
}

TEST(Launchers, SlurmFirstHost) {
  EXPECT_EQ(slurm_first_host("gpu[07-09,12],login1"), "gpu07");
  EXPECT_EQ(slurm_first_host("a,b"), "a");
  EXPECT_EQ(slurm_first_host("node1"), "node1");
  EXPECT_EQ(slurm_first_host("rack[2,4]-n[003-004]"), "rack2-n003");
  EXPECT_EQ(slurm_first_host("n[5]"), "n5");
  EXPECT_THROW(slurm_first_host("n[1-2"), Error);
  EXPECT_THROW(slurm_first_host("n[]"), Error);
  EXPECT_THROW(slurm_first_host(""), Error);
}

// gcommCommInitFromEnv meets through MPI when asked (GRADCOMM_BOOTSTRAP=mpi), or
// under mpirun across hosts with no MASTER_ADDR (if the plugin is found).
TEST(Launchers, WhenTheMpiBootstrapIsUsed) {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  using M = std::map<std::string, std::string>;
  const M across_hosts = {{"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                          {"OMPI_MCA_ess_base_jobid", "9"}};
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(across_hosts)), comm::BootstrapChoice::kMpiIfFound);
  M one_host = across_hosts;
  one_host["OMPI_COMM_WORLD_LOCAL_SIZE"] = "4";
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(one_host)), comm::BootstrapChoice::kTcp) << "loopback serves";
  M with_master = across_hosts;
  with_master["MASTER_ADDR"] = "node0";
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(with_master)), comm::BootstrapChoice::kTcp);
  EXPECT_EQ(comm::bootstrap_choice(c, lookup({{"RANK", "0"}, {"WORLD_SIZE", "2"}})),
            comm::BootstrapChoice::kTcp);
  M forced = one_host;
  forced["GRADCOMM_BOOTSTRAP"] = "mpi";
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(forced)), comm::BootstrapChoice::kMpi);
  forced["GRADCOMM_BOOTSTRAP"] = "tcp";
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(forced)), comm::BootstrapChoice::kTcp);
  forced["GRADCOMM_BOOTSTRAP"] = "pmix";
  EXPECT_THROW(comm::bootstrap_choice(c, lookup(forced)), Error);
  c.master_addr = "node0";
  EXPECT_EQ(comm::bootstrap_choice(c, lookup(across_hosts)), comm::BootstrapChoice::kTcp);
}

}  // namespace
}  // namespace gradcomm::comm::bootstrap
