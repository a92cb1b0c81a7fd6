#include "perf_json.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

bool PerfJson::create(const std::string& path, std::string& error) {
  std::string candidate = path;
  for (int n = 0;; ++n) {
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      path_ = candidate;
      return true;
    }
    if (errno != EEXIST || n > 10000) {
      error = "-J " + candidate + ": " + std::strerror(errno);
      return false;
    }
    candidate = path + "." + std::to_string(n);
  }
}

void PerfJson::add_result(nlohmann::json row) {
  if (!doc_.contains("results")) doc_["results"] = nlohmann::json::array();
  doc_["results"].push_back(std::move(row));
}

bool PerfJson::flush() {
  if (!active()) return true;
  std::ofstream out(path_, std::ios::trunc);
  out << doc_.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.close();
  if (!out && !warned_) {
    std::fprintf(stderr, "gradcomm-perf: writing %s failed\n", path_.c_str());
    warned_ = true;
  }
  return static_cast<bool>(out);
}

std::string PerfJson::now() {
  char buffer[64];
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &local);
  return buffer;
}
