#include "comm/host_lane.hpp"

#include "common/log.hpp"

namespace gradcomm::comm {

HostLane::HostLane(int log_rank) : thread_([this, log_rank] { loop(log_rank); }) {}

HostLane::~HostLane() {
  wait_idle();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void HostLane::push(std::function<void()> work, Errors& errors) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (errors.first) std::rethrow_exception(errors.first);
    queue_.push_back(Item{std::move(work), &errors});
  }
  work_.notify_one();
}

void HostLane::drain(Errors& errors) {
  if (on_lane_thread()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return head_ == queue_.size() && !busy_; });
  if (errors.first) std::rethrow_exception(errors.first);
}

void HostLane::wait_idle() noexcept {
  if (on_lane_thread()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return head_ == queue_.size() && !busy_; });
}

void HostLane::loop(int log_rank) {
  set_thread_log_rank(log_rank);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stop_ || head_ < queue_.size(); });
    if (head_ == queue_.size()) return;  // stop_, nothing left
    Item item = std::move(queue_[head_++]);
    const bool skip = item.errors->first != nullptr;
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    if (!skip) {
      try {
        item.work();
      } catch (...) {
        error = std::current_exception();
      }
    }
    item.work = nullptr;  // what it captured goes before anyone hears the queue is idle
    lock.lock();
    if (error && !item.errors->first) item.errors->first = error;
    busy_ = false;
    if (head_ == queue_.size()) {
      queue_.clear();  // keeps the capacity
      head_ = 0;
      idle_.notify_all();
    }
  }
}

}  // namespace gradcomm::comm
