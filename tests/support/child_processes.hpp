// Test programs that start other programs as separate processes (ranks of a
// multi-process job) under a launcher's variables, wait for them with a deadline
// and kill those that overstay, so a hang fails the test instead of the CI job.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gradcomm::test {

using ChildClock = std::chrono::steady_clock;
using Env = std::map<std::string, std::string>;

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The parent's environment without any launcher's variables (the CI may itself
// run under Slurm), plus `extra`.
inline std::vector<std::string> child_environment(const Env& extra) {
  auto launcher_var = [](const std::string& name) {
    for (const char* prefix : {"OMPI_", "SLURM_", "PMI", "GRADCOMM_TEST_"})
      if (name.rfind(prefix, 0) == 0) return true;
    for (const char* exact : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                              "GRADCOMM_JOB_KEY", "GRADCOMM_TIMEOUT_S"})
      if (name == exact) return true;
    return false;
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    if (!launcher_var(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

struct Outcome {
  int exit_code = -1;  // -1: killed after overstaying
  std::string output;
  double seconds = 0;
};

class ChildJob {
 public:
  ~ChildJob() {
    for (auto& c : children_)
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
    for (auto& c : children_) ::unlink(c.log.c_str());
  }

  // `program` with `args`, in this environment without a launcher's variables plus `env`.
  void spawn(const std::string& program, const std::vector<std::string>& args, const Env& env) {
    Child c;
    char path[] = "/tmp/gradcomm_rank_XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    c.log = path;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, c.log.c_str(), O_WRONLY | O_TRUNC, 0);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<std::string> env_strings = child_environment(env);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<char*> argv = {const_cast<char*>(program.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    c.start = ChildClock::now();
    int rc = posix_spawn(&c.pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(rc, 0) << "cannot start " << program;
    children_.push_back(c);
  }

  // Waits for every child until `seconds` have passed, then kills the rest.
  std::vector<Outcome> wait(double seconds) {
    auto deadline = ChildClock::now() +
                    std::chrono::duration_cast<ChildClock::duration>(std::chrono::duration<double>(seconds));
    std::vector<Outcome> out(children_.size());
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      int status = 0;
      for (;;) {
        pid_t r = ::waitpid(c.pid, &status, WNOHANG);
        if (r == c.pid) {
          out[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          break;
        }
        if (ChildClock::now() >= deadline) {
          ::kill(c.pid, SIGKILL);
          ::waitpid(c.pid, nullptr, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      out[i].seconds = std::chrono::duration<double>(ChildClock::now() - c.start).count();
      c.pid = -1;
      std::ifstream in(c.log);
      std::stringstream ss;
      ss << in.rdbuf();
      out[i].output = ss.str();
    }
    return out;
  }

 private:
  struct Child {
    pid_t pid = -1;
    std::string log;
    ChildClock::time_point start;
  };
  std::vector<Child> children_;
};

inline Env torchrun(int rank, int world, int port, double timeout_s) {
  return {{"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},  {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}, {"GRADCOMM_TIMEOUT_S", std::to_string(timeout_s)}};
}

// `name` in this program's folder (binaries carried to another machine keep their
// folder), else `built` (where CMake built it).
inline std::string program_beside_this_one(const char* name, const char* built) {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string beside = std::string(self, static_cast<size_t>(n));
    beside = beside.substr(0, beside.rfind('/') + 1) + name;
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return built;
}

}  // namespace gradcomm::test
